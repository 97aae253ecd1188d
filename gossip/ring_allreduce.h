// Chunked ring all-reduce (reduce-scatter, then all-gather) over any group of sites: the whole view
// for allreduce, dts and re-averaging, one grid row or column for dsync.
//
// The data is cut into one segment per member, each segment into pieces of at most `max_piece`
// floats so that receiving, adding and forwarding overlap along the ring. Segment c is summed in one
// fixed order along the ring, starting at its member c: ((x_c + x_{c+1}) + x_{c+2}) + ... , finished
// (and divided by the group size when averaging) by the one member that owns it, then copied around
// the ring unchanged. So every member ends with the same bits, whatever the timing.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gossip/inbox.h"
#include "gossip/round.h"
#include "peer/message.h"

namespace meridian::gossip {

struct RingOptions {
  peer::MessageKind kind = peer::MessageKind::kReduceChunk;
  bool average = false;  // divide the sum by the group size (the mean instead of the sum)
  // Floats per message (1 MiB). Over ZeroMQ a piece that fits one wire chunk (peer::WireLimits::
  // chunk_bytes, 1 MiB by default) is combined straight from the receive buffer; larger ones are
  // reassembled into a pooled buffer first.
  std::size_t max_piece = 1u << 18;
  // Asked about every 100 ms while a piece is awaited; true abandons the round at once instead of at
  // its deadline (a member is known to be gone). Empty: wait for the deadline.
  std::function<bool()> give_up;
};

// Thread-safety: none; used by the communication thread that owns the inbox. Received pieces go
// straight into the data and on to the next member (Transport::receive_into with a relay), never
// through a buffer of the ring's own; the first pieces it sends come from the transport's take_buffer,
// so that large rounds do not allocate (and first-touch) fresh memory every time.
class RingAllReduce {
 public:
  explicit RingAllReduce(Inbox& inbox) : inbox_(inbox) {}

  // Replaces `data` by the sum (or mean) of every member's `data` over `group`, which lists the
  // members in ring order (every member must pass the same list, the same round and the same size).
  // Returns kCompleted, or kAbandoned when a message did not arrive by `deadline`; after kAbandoned
  // the contents of `data` are unspecified (the caller keeps its own copy to redo the round).
  // Throws error::InternalError if this site is not in `group`.
  RoundStatus run(const std::vector<std::string>& group, const Round& round, std::span<float> data,
                  Clock::time_point deadline, const RingOptions& options = {});

  // Messages that claimed to belong to a round this site was running but had the wrong size (or, where
  // the transport does not drop them itself, non-finite values).
  std::uint64_t rejected() const { return rejected_; }

 private:
  Inbox& inbox_;
  std::uint64_t rejected_ = 0;
};

// The half-open range [begin, begin + size) of segment `index` when `total` elements are cut into
// `parts` segments whose sizes differ by at most one (the first total % parts are one longer).
struct Segment {
  std::size_t begin = 0;
  std::size_t size = 0;
};
Segment segment_of(std::size_t total, std::size_t parts, std::size_t index);

}  // namespace meridian::gossip

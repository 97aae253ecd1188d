// Reassembles chunked messages (peer/wire_codec.h) per sender into one Message whose payload buffer
// comes from a BufferPool. Chunks of one sender arrive in order over one connection; a chunk out of
// order, a new message before the previous one is complete, or a non-finite value drops the whole
// message (its remaining chunks are swallowed silently) and reports why. An opaque payload
// (peer/opaque_payload.h), as its first chunk's header says, is copied unread.
//
// Thread-safety: none; the transport's I/O thread owns it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "peer/buffer_pool.h"
#include "peer/payload_sink.h"
#include "peer/wire_codec.h"

namespace meridian::peer {

class Reassembler {
 public:
  // `pool` must outlive the reassembler.
  explicit Reassembler(BufferPool& pool) : pool_(pool) {}

  struct Result {
    std::optional<Message> complete;    // set when this chunk completed a message (from = sender)
    std::vector<Rejection> rejections;  // messages dropped because of this chunk (0, 1 or 2)
    bool sunk = false;                  // `complete`'s payload went into the sink (and is empty)
  };

  // Adds one chunk whose header passed decode_header, with its payload frame (chunk_elements floats).
  // With a `sink`, a message of one chunk that the sink accepts is combined into it straight from
  // `payload` (PayloadSink::apply: read once, checked for finite values on the way, the result also
  // written to `copy` when given, which may be the payload's own memory) instead of being copied into
  // a pooled buffer. Messages of several chunks always take the pooled buffer.
  Result add(const std::string& sender, const WireHeader& h, std::span<const std::byte> payload,
             const PayloadSink* sink = nullptr, std::span<float> copy = {});

  // Drops any partial message of `sender` (it died or left), returning its buffer to the pool.
  void forget(const std::string& sender);

  std::size_t in_progress() const { return partial_.size(); }

 private:
  struct Partial {
    std::uint64_t message_id = 0;
    std::uint32_t next_index = 0;
    std::uint32_t chunk_count = 0;
    std::uint64_t filled = 0;
    bool poisoned = false;  // dropped: swallow the rest of its chunks
    Message msg;
  };

  void release(Partial& p);

  BufferPool& pool_;
  std::map<std::string, Partial> partial_;
};

}  // namespace meridian::peer

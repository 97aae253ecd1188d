// A message between sites as the rest of Meridian sees it: a plain struct. The wire codec (peer/wire*)
// is the only place that turns it into protobuf frames and back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meridian::peer {

// What a message is for. Membership kinds are consumed inside peer/; the mixer kinds reach gossip/.
enum class MessageKind : std::uint8_t {
  kHello = 1,    // protocol version, model fingerprint, listen address
  kMembers = 2,  // gossip of the member list and announced views
  kHeartbeat = 3,
  kLeave = 4,
  kPushSum = 5,      // sgp: a push-sum share; payload = share of x, weight = share of w
  kReduceChunk = 6,  // ring all-reduce (allreduce, dts, re-averaging): one chunk of one ring step
  kGroupChunk = 7,   // dsync: one chunk of a group all-reduce
  kControl = 8,
  kCompressedShare = 9,  // a site's lossy-compressed contribution to a mean, sent to every member of the
                         // round (gossip/direct_mean_mixer.h); phase = gossip::Encoding of the payload
};

// True for the kinds a Transport hands to gossip/ through receive().
constexpr bool is_mixer_kind(MessageKind kind) {
  return kind == MessageKind::kPushSum || kind == MessageKind::kReduceChunk || kind == MessageKind::kGroupChunk ||
         kind == MessageKind::kCompressedShare;
}

struct Message {
  MessageKind kind = MessageKind::kControl;
  // Sender's site name. Set by the receiving transport from the authenticated connection, never
  // trusted from the payload.
  std::string from;
  std::uint64_t view_id = 0;   // the view the round runs in
  std::uint64_t round = 0;     // the training step the round belongs to
  std::uint32_t tag = 0;       // tells apart collectives of the same round (e.g. gradient vs re-average)
  std::uint32_t phase = 0;     // position inside a collective (ring step, grid axis, ...)
  std::uint64_t offset = 0;    // element offset of `payload` inside the whole tensor
  std::uint64_t total = 0;     // elements of the whole tensor
  double weight = 0.0;         // push-sum weight share (kPushSum only)
  std::vector<float> payload;  // tensor data; travels as a raw frame, never copied into protobuf
  std::string body;            // small opaque bytes for membership and control kinds
};

}  // namespace meridian::peer

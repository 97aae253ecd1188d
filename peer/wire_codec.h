// The wire codec: the one place where Meridian's protobuf schema (proto/meridian.proto) meets the rest
// of the code. It turns a peer::Message into chunks (a small protobuf header frame plus a raw float32
// payload frame each) and a received header frame back into a plain WireHeader, checking structure and
// size caps on the way. Semantic checks (sender, fingerprint, rounds, values) are the validator's job
// (peer/message_validator.h); reassembly is peer/reassembler.h.
//
// Payload frames carry float32 in host byte order; Meridian requires a little-endian host (checked at
// compile time), so the wire is little-endian.
//
// Thread-safety: every function is pure and may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "peer/membership_messages.h"
#include "peer/message.h"
#include "peer/rejection.h"

namespace meridian::peer {

inline constexpr std::uint32_t kProtocolVersion = 1;

struct WireLimits {
  std::size_t max_header_bytes = 64 * 1024;         // a header frame above this is rejected unread
  std::size_t chunk_bytes = 1 << 20;                // payload bytes per chunk when sending
  std::uint64_t max_payload_elements = 1ull << 28;  // 1 GiB of float32 per message on receive
  std::uint32_t max_chunks = 1u << 20;
};

// A decoded header: the Message fields plus the chunking fields, with no protobuf type in sight.
struct WireHeader {
  std::uint32_t protocol_version = 0;
  std::uint64_t model_fingerprint = 0;
  MessageKind kind = MessageKind::kControl;
  std::uint64_t message_id = 0;
  std::uint32_t chunk_index = 0;
  std::uint32_t chunk_count = 1;
  std::uint64_t chunk_offset = 0;
  std::uint64_t chunk_elements = 0;
  std::uint64_t payload_elements = 0;
  std::uint64_t view_id = 0;
  std::uint64_t round = 0;
  std::uint32_t tag = 0;
  std::uint32_t phase = 0;
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
  double weight = 0.0;
  std::string body;

  // The message this header describes, with an empty payload (the reassembler fills it).
  Message to_message() const;
};

// One chunk of an encoded message: its header frame and the slice [offset, offset + elements) of the
// message payload that follows it as the raw frame (no raw frame when elements == 0).
struct EncodedChunk {
  std::string header;
  std::size_t offset = 0;
  std::size_t elements = 0;
};

// Splits `msg` into chunks of at most limits.chunk_bytes of payload (at least one chunk, even for an
// empty payload). `message_id` ties the chunks together; senders increase it per message.
// `payload_elements`, when given, is the payload length instead of msg.payload.size() (for a payload
// that travels in a frame of its own, not in `msg`).
// Throws error::InternalError when limits.chunk_bytes < sizeof(float).
std::vector<EncodedChunk> encode_message(const Message& msg, std::uint64_t model_fingerprint, std::uint64_t message_id,
                                         const WireLimits& limits,
                                         std::optional<std::size_t> payload_elements = std::nullopt);

struct Rejection {
  RejectCause cause;
  std::string detail;
};

// Decodes a header frame that arrived with a payload frame of `payload_frame_bytes` bytes (nullopt when
// there was no payload frame). Checks: header size cap, well-formed protobuf, protocol version, known
// kind, chunk fields consistent (index < count, slice inside the payload, count matches the payload),
// payload size cap, the payload frame present and exactly chunk_elements floats, no payload on
// membership kinds. Never throws on bad input.
std::variant<WireHeader, Rejection> decode_header(std::span<const std::byte> header_frame,
                                                  std::optional<std::size_t> payload_frame_bytes,
                                                  const WireLimits& limits);

// Membership bodies. encode_* never fail; decode_* return nullopt when `body` is not a well-formed
// message of that type. Every address in them (a hello's listening address, a member record's) is
// either empty (not known) or a site address (peer/site_address.h): a member list with another is not
// well-formed, and a hello with another is refused as RejectCause::kAddress (any other defect:
// kMalformed).
std::string encode_hello(const HelloInfo& hello);
std::variant<HelloInfo, Rejection> decode_hello(std::string_view body);
std::string encode_members(const MemberListInfo& members);
std::optional<MemberListInfo> decode_members(std::string_view body);
std::string encode_heartbeat(const HeartbeatInfo& heartbeat);
std::optional<HeartbeatInfo> decode_heartbeat(std::string_view body);
std::string encode_leave(const LeaveInfo& leave);
std::optional<LeaveInfo> decode_leave(std::string_view body);

}  // namespace meridian::peer

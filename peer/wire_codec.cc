#include "peer/wire_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "error/error.h"
#include "peer/roster.h"
#include "peer/site_address.h"
#include "proto/meridian.pb.h"

namespace meridian::peer {

static_assert(std::endian::native == std::endian::little,
              "Meridian's payload frames are raw float32 in host order; the wire is defined as little-endian");
static_assert(sizeof(float) == 4);

namespace {

// Our enum and the schema's enum share their numbers; these conversions are the only bridge.
wire::Kind to_wire(MessageKind kind) { return static_cast<wire::Kind>(static_cast<int>(kind)); }

std::optional<MessageKind> from_wire(int kind) {
  if (kind < static_cast<int>(MessageKind::kHello) || kind > static_cast<int>(MessageKind::kCompressedShare))
    return std::nullopt;
  return static_cast<MessageKind>(kind);
}

bool is_membership_kind(MessageKind kind) {
  return kind == MessageKind::kHello || kind == MessageKind::kMembers || kind == MessageKind::kHeartbeat ||
         kind == MessageKind::kLeave;
}

// Bounds for gossip contents, far above any real federation; they keep a hostile member list from
// making us allocate or loop without bound.
constexpr int kMaxMembers = 4096;
constexpr int kMaxViews = 64;
constexpr std::size_t kMaxNameBytes = 256;
// Federation terms in a hello: a handful of fields, each a line of text (a model description, an
// algorithm and its knobs).
constexpr std::size_t kMaxTerms = 32;
constexpr std::size_t kMaxTermBytes = 16384;

template <typename Proto>
std::optional<Proto> parse(std::string_view body) {
  Proto p;
  if (body.size() > static_cast<std::size_t>(INT32_MAX)) return std::nullopt;
  if (!p.ParseFromArray(body.data(), static_cast<int>(body.size()))) return std::nullopt;
  return p;
}

}  // namespace

Message WireHeader::to_message() const {
  Message m;
  m.kind = kind;
  m.view_id = view_id;
  m.round = round;
  m.tag = tag;
  m.phase = phase;
  m.offset = offset;
  m.total = total;
  m.weight = weight;
  m.body = body;
  return m;
}

std::vector<EncodedChunk> encode_message(const Message& msg, std::uint64_t model_fingerprint, std::uint64_t message_id,
                                         const WireLimits& limits, std::optional<std::size_t> payload_elements) {
  if (limits.chunk_bytes < sizeof(float)) throw error::InternalError("wire chunk size must hold one float");
  const std::size_t per_chunk = limits.chunk_bytes / sizeof(float);
  const std::size_t n = payload_elements.value_or(msg.payload.size());
  const std::size_t count = n == 0 ? 1 : (n + per_chunk - 1) / per_chunk;

  wire::Header h;
  h.set_protocol_version(kProtocolVersion);
  h.set_model_fingerprint(model_fingerprint);
  h.set_kind(to_wire(msg.kind));
  h.set_message_id(message_id);
  h.set_chunk_count(static_cast<std::uint32_t>(count));
  h.set_payload_elements(n);
  h.set_view_id(msg.view_id);
  h.set_round(msg.round);
  h.set_tag(msg.tag);
  h.set_phase(msg.phase);
  h.set_offset(msg.offset);
  h.set_total(msg.total);
  h.set_weight(msg.weight);
  if (!msg.body.empty()) h.set_body(msg.body);

  std::vector<EncodedChunk> chunks(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t off = i * per_chunk;
    const std::size_t len = std::min(per_chunk, n - std::min(n, off));
    h.set_chunk_index(static_cast<std::uint32_t>(i));
    h.set_chunk_offset(off);
    h.set_chunk_elements(len);
    // The body (membership gossip) rides only on the first chunk; later chunks repeat the small fields.
    if (i == 1) h.clear_body();
    chunks[i].header = h.SerializeAsString();
    chunks[i].offset = off;
    chunks[i].elements = len;
  }
  return chunks;
}

std::variant<WireHeader, Rejection> decode_header(std::span<const std::byte> header_frame,
                                                  std::optional<std::size_t> payload_frame_bytes,
                                                  const WireLimits& limits) {
  auto reject = [](RejectCause c, std::string d) { return Rejection{c, std::move(d)}; };
  if (header_frame.size() > limits.max_header_bytes)
    return reject(RejectCause::kOversized, "header frame of " + std::to_string(header_frame.size()) +
                                               " bytes exceeds the cap of " + std::to_string(limits.max_header_bytes));
  wire::Header h;
  if (!h.ParseFromArray(header_frame.data(), static_cast<int>(header_frame.size())))
    return reject(RejectCause::kMalformed, "header frame is not a well-formed protobuf Header");
  if (h.protocol_version() != kProtocolVersion)
    return reject(RejectCause::kVersion, "protocol version " + std::to_string(h.protocol_version()) + ", expected " +
                                             std::to_string(kProtocolVersion));
  auto kind = from_wire(h.kind());
  if (!kind) return reject(RejectCause::kUnknownKind, "message kind " + std::to_string(h.kind()));

  if (h.payload_elements() > limits.max_payload_elements)
    return reject(RejectCause::kOversized, "payload of " + std::to_string(h.payload_elements()) +
                                               " elements exceeds the cap of " +
                                               std::to_string(limits.max_payload_elements));
  if (h.chunk_count() == 0 || h.chunk_count() > limits.max_chunks || h.chunk_index() >= h.chunk_count())
    return reject(RejectCause::kMalformed,
                  "chunk " + std::to_string(h.chunk_index()) + " of " + std::to_string(h.chunk_count()));
  // Overflow-safe: offset <= payload and elements <= payload - offset.
  if (h.chunk_offset() > h.payload_elements() || h.chunk_elements() > h.payload_elements() - h.chunk_offset())
    return reject(RejectCause::kMalformed, "chunk slice lies outside the message payload");
  if (h.chunk_count() > 1 && h.chunk_elements() == 0)
    return reject(RejectCause::kMalformed, "empty chunk in a chunked message");
  if (h.chunk_count() > h.payload_elements() && h.payload_elements() > 0)
    return reject(RejectCause::kMalformed, "more chunks than payload elements");
  if (is_membership_kind(*kind) && h.payload_elements() != 0)
    return reject(RejectCause::kMalformed, "membership message with a tensor payload");

  const std::size_t expected_bytes = static_cast<std::size_t>(h.chunk_elements()) * sizeof(float);
  if (h.chunk_elements() > 0 && !payload_frame_bytes) return reject(RejectCause::kTruncated, "payload frame missing");
  if (payload_frame_bytes && *payload_frame_bytes != expected_bytes) {
    return reject(*payload_frame_bytes < expected_bytes ? RejectCause::kTruncated : RejectCause::kMalformed,
                  "payload frame of " + std::to_string(*payload_frame_bytes) + " bytes, header says " +
                      std::to_string(expected_bytes));
  }

  WireHeader out;
  out.protocol_version = h.protocol_version();
  out.model_fingerprint = h.model_fingerprint();
  out.kind = *kind;
  out.message_id = h.message_id();
  out.chunk_index = h.chunk_index();
  out.chunk_count = h.chunk_count();
  out.chunk_offset = h.chunk_offset();
  out.chunk_elements = h.chunk_elements();
  out.payload_elements = h.payload_elements();
  out.view_id = h.view_id();
  out.round = h.round();
  out.tag = h.tag();
  out.phase = h.phase();
  out.offset = h.offset();
  out.total = h.total();
  out.weight = h.weight();
  out.body = h.body();
  return out;
}

std::string encode_hello(const HelloInfo& hello) {
  wire::Hello p;
  p.set_name(hello.name);
  p.set_listen_address(hello.listen_address);
  p.set_region(hello.region);
  p.set_incarnation(hello.incarnation);
  p.set_round(hello.round);
  for (const auto& term : hello.terms) {
    auto* t = p.add_terms();
    t->set_name(term.name);
    t->set_value(term.value);
    t->set_display(term.display);
  }
  p.set_refusal(hello.refusal);
  return p.SerializeAsString();
}

std::variant<HelloInfo, Rejection> decode_hello(std::string_view body) {
  auto malformed = [] { return Rejection{RejectCause::kMalformed, "hello body is not a well-formed Hello"}; };
  auto p = parse<wire::Hello>(body);
  if (!p || !is_valid_site_name(p->name()) || p->listen_address().size() > kMaxNameBytes ||
      p->region().size() > kMaxNameBytes)
    return malformed();
  if (p->terms_size() > static_cast<int>(kMaxTerms) || p->refusal().size() > kMaxTermBytes) return malformed();
  // Whatever a peer announces may be dialed (a refusal goes to it, membership connects to it): only a
  // plain tcp://host:port, never another transport or a form libzmq cannot parse.
  if (!p->listen_address().empty()) {
    if (auto problem = site_address_problem(p->listen_address()))
      return Rejection{RejectCause::kAddress, "hello announces the listening address '" +
                                                  p->listen_address() + "': " + *problem};
  }
  HelloInfo out{p->name(), p->listen_address(), p->region(), p->incarnation(), p->round(), {}, p->refusal()};
  for (const auto& t : p->terms()) {
    if (t.name().empty() || t.name().size() > kMaxNameBytes || t.value().size() > kMaxTermBytes ||
        t.display().size() > kMaxTermBytes)
      return malformed();
    out.terms.push_back(Term{t.name(), t.value(), t.display()});
  }
  return out;
}

std::string encode_members(const MemberListInfo& members) {
  wire::MemberList p;
  for (const auto& m : members.members) {
    auto* q = p.add_members();
    q->set_name(m.name);
    q->set_address(m.address);
    q->set_region(m.region);
    q->set_incarnation(m.incarnation);
    q->set_state(static_cast<wire::Member::State>(static_cast<int>(m.state)));
  }
  for (const auto& v : members.views) {
    auto* q = p.add_views();
    q->set_id(v.id);
    q->set_effective_round(v.effective_round);
    for (const auto& name : v.members) q->add_members(name);
    q->set_pace_rtt_us(v.pace.rtt_us);
    q->set_pace_step_us(v.pace.step_us);
  }
  p.set_round(members.round);
  return p.SerializeAsString();
}

std::optional<MemberListInfo> decode_members(std::string_view body) {
  auto p = parse<wire::MemberList>(body);
  if (!p || p->members_size() > kMaxMembers || p->views_size() > kMaxViews) return std::nullopt;
  MemberListInfo out;
  out.round = p->round();
  for (const auto& q : p->members()) {
    if (!is_valid_site_name(q.name()) || q.address().size() > kMaxNameBytes || q.region().size() > kMaxNameBytes ||
        q.state() < wire::Member::ALIVE || q.state() > wire::Member::LEFT)
      return std::nullopt;
    // A gossiped address may be dialed: the same rule as a hello's (empty: not known).
    if (!q.address().empty() && !is_valid_site_address(q.address())) return std::nullopt;
    out.members.push_back({q.name(), q.address(), q.region(), q.incarnation(), static_cast<MemberState>(q.state())});
  }
  for (const auto& q : p->views()) {
    if (q.members_size() > kMaxMembers) return std::nullopt;
    View v{q.id(), q.effective_round(), {q.members().begin(), q.members().end()}, {q.pace_rtt_us(), q.pace_step_us()}};
    // A view must already be in canonical form (sorted, unique, named): ranks derive from it.
    if (v.members.empty() || v != View::of(v.members, v.id, v.effective_round, v.pace)) return std::nullopt;
    // A pace is measured or not as a whole, and bounded: shapes are chosen from it.
    if ((v.pace.rtt_us == 0) != (v.pace.step_us == 0) || v.pace.rtt_us > kMaxPaceMicros ||
        v.pace.step_us > kMaxPaceMicros)
      return std::nullopt;
    for (const auto& name : v.members)
      if (!is_valid_site_name(name)) return std::nullopt;
    out.views.push_back(std::move(v));
  }
  return out;
}

std::string encode_heartbeat(const HeartbeatInfo& heartbeat) {
  wire::Heartbeat p;
  p.set_incarnation(heartbeat.incarnation);
  p.set_round(heartbeat.round);
  p.set_sent_us(heartbeat.sent_us);
  p.set_echo_us(heartbeat.echo_us);
  p.set_held_us(heartbeat.held_us);
  p.set_rtt_us(heartbeat.rtt_us);
  p.set_step_us(heartbeat.step_us);
  return p.SerializeAsString();
}

std::optional<HeartbeatInfo> decode_heartbeat(std::string_view body) {
  auto p = parse<wire::Heartbeat>(body);
  if (!p || p->rtt_us() > kMaxPaceMicros || p->step_us() > kMaxPaceMicros) return std::nullopt;
  return HeartbeatInfo{p->incarnation(), p->round(),  p->sent_us(), p->echo_us(),
                       p->held_us(),     p->rtt_us(), p->step_us()};
}

std::string encode_leave(const LeaveInfo& leave) {
  wire::Leave p;
  p.set_incarnation(leave.incarnation);
  return p.SerializeAsString();
}

std::optional<LeaveInfo> decode_leave(std::string_view body) {
  auto p = parse<wire::Leave>(body);
  if (!p) return std::nullopt;
  return LeaveInfo{p->incarnation()};
}

}  // namespace meridian::peer

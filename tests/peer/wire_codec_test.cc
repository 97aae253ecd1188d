#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>

#include "peer/buffer_pool.h"
#include "peer/opaque_payload.h"
#include "peer/reassembler.h"
#include "peer/wire_codec.h"
#include "proto/meridian.pb.h"

using namespace meridian::peer;

namespace {

constexpr std::uint64_t kFingerprint = 0xfeedface12345678ull;

std::span<const std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

Message tensor_message(std::size_t n, MessageKind kind = MessageKind::kPushSum) {
  Message m;
  m.kind = kind;
  m.view_id = 3;
  m.round = 17;
  m.tag = 2;
  m.phase = 5;
  m.offset = 0;
  m.total = n;
  m.weight = 0.25;
  m.payload.resize(n);
  std::iota(m.payload.begin(), m.payload.end(), 1.0f);
  return m;
}

WireHeader decode_ok(const EncodedChunk& c, const WireLimits& limits = {}) {
  auto r =
      decode_header(bytes(c.header), c.elements ? std::optional<std::size_t>(c.elements * 4) : std::nullopt, limits);
  REQUIRE(std::holds_alternative<WireHeader>(r));
  return std::get<WireHeader>(r);
}

RejectCause decode_cause(const std::string& header, std::optional<std::size_t> payload, const WireLimits& limits = {}) {
  auto r = decode_header(bytes(header), payload, limits);
  REQUIRE(std::holds_alternative<Rejection>(r));
  return std::get<Rejection>(r).cause;
}

std::span<const std::byte> slice(const Message& m, const EncodedChunk& c) {
  return {reinterpret_cast<const std::byte*>(m.payload.data() + c.offset), c.elements * sizeof(float)};
}

}  // namespace

TEST_CASE("wire codec round-trips every field of a tensor message in one chunk", "[peer][wire][unit]") {
  const Message m = tensor_message(1000);
  auto chunks = encode_message(m, kFingerprint, 42, WireLimits{});
  REQUIRE(chunks.size() == 1);
  const WireHeader h = decode_ok(chunks[0]);
  CHECK(h.protocol_version == kProtocolVersion);
  CHECK(h.model_fingerprint == kFingerprint);
  CHECK(h.message_id == 42);
  CHECK(h.kind == MessageKind::kPushSum);
  CHECK(h.view_id == 3);
  CHECK(h.round == 17);
  CHECK(h.tag == 2);
  CHECK(h.phase == 5);
  CHECK(h.total == 1000);
  CHECK(h.weight == 0.25);
  CHECK(h.payload_elements == 1000);

  BufferPool pool;
  Reassembler r(pool);
  auto res = r.add("b", h, slice(m, chunks[0]));
  REQUIRE(res.complete);
  CHECK(res.rejections.empty());
  CHECK(res.complete->from == "b");
  CHECK(res.complete->payload == m.payload);
  CHECK(res.complete->weight == 0.25);
}

TEST_CASE("messages above the chunk size are chunked and reassembled exactly", "[peer][wire][unit]") {
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{257}, std::size_t{1021}}) {
    WireLimits limits;
    limits.chunk_bytes = 256 * sizeof(float);
    const Message m = tensor_message(n, MessageKind::kReduceChunk);
    auto chunks = encode_message(m, kFingerprint, 7, limits);
    CHECK(chunks.size() == (n == 0 ? 1 : (n + 255) / 256));
    BufferPool pool;
    Reassembler r(pool);
    std::optional<Message> done;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      auto res = r.add("a", decode_ok(chunks[i], limits), slice(m, chunks[i]));
      CHECK(res.rejections.empty());
      CHECK(res.complete.has_value() == (i + 1 == chunks.size()));
      if (res.complete) done = std::move(res.complete);
    }
    REQUIRE(done);
    CHECK(done->payload == m.payload);
    CHECK(r.in_progress() == 0);
  }
}

TEST_CASE("a chunked message missing a chunk is dropped as a whole", "[peer][wire][unit]") {
  WireLimits limits;
  limits.chunk_bytes = 64;
  const Message m = tensor_message(100);
  auto chunks = encode_message(m, kFingerprint, 1, limits);
  REQUIRE(chunks.size() == 7);
  BufferPool pool;
  Reassembler r(pool);
  CHECK(r.add("a", decode_ok(chunks[0], limits), slice(m, chunks[0])).rejections.empty());
  // Chunk 1 is lost; chunk 2 arrives: the message is dropped, the rest swallowed without more noise.
  auto res = r.add("a", decode_ok(chunks[2], limits), slice(m, chunks[2]));
  REQUIRE(res.rejections.size() == 1);
  CHECK(res.rejections[0].cause == RejectCause::kIncomplete);
  for (std::size_t i = 3; i < chunks.size(); ++i) {
    auto rest = r.add("a", decode_ok(chunks[i], limits), slice(m, chunks[i]));
    CHECK_FALSE(rest.complete);
    CHECK(rest.rejections.empty());
  }
  CHECK(r.in_progress() == 0);
  // The next message from the same sender goes through.
  auto next = encode_message(m, kFingerprint, 2, limits);
  std::optional<Message> done;
  for (auto& c : next) {
    auto x = r.add("a", decode_ok(c, limits), slice(m, c));
    if (x.complete) done = std::move(x.complete);
  }
  REQUIRE(done);
  CHECK(done->payload == m.payload);
}

TEST_CASE("a message abandoned halfway is reported when the sender moves on", "[peer][wire][unit]") {
  WireLimits limits;
  limits.chunk_bytes = 64;
  const Message m = tensor_message(100);
  auto first = encode_message(m, kFingerprint, 1, limits);
  auto second = encode_message(m, kFingerprint, 2, limits);
  BufferPool pool;
  Reassembler r(pool);
  r.add("a", decode_ok(first[0], limits), slice(m, first[0]));
  auto res = r.add("a", decode_ok(second[0], limits), slice(m, second[0]));
  REQUIRE(res.rejections.size() == 1);
  CHECK(res.rejections[0].cause == RejectCause::kIncomplete);
  CHECK(r.in_progress() == 1);
}

TEST_CASE("a NaN or infinity anywhere in a chunked payload drops the message", "[peer][wire][unit]") {
  WireLimits limits;
  limits.chunk_bytes = 64;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    Message m = tensor_message(100);
    m.payload[77] = bad;
    auto chunks = encode_message(m, kFingerprint, 1, limits);
    BufferPool pool;
    Reassembler r(pool);
    std::vector<RejectCause> causes;
    bool completed = false;
    for (auto& c : chunks) {
      auto res = r.add("a", decode_ok(c, limits), slice(m, c));
      for (auto& rej : res.rejections) causes.push_back(rej.cause);
      completed = completed || res.complete.has_value();
    }
    CHECK_FALSE(completed);
    CHECK(causes == std::vector<RejectCause>{RejectCause::kNonFinite});
  }
}

TEST_CASE("an opaque payload is reassembled unread, while a float payload's NaN still drops its message",
          "[peer][wire][unit]") {
  WireLimits limits;
  limits.chunk_bytes = 64;
  // Words that are NaN and infinity as floats: bytes of an opaque payload (peer/opaque_payload.h).
  Message opaque = tensor_message(100, MessageKind::kCompressedShare);
  opaque.phase = kOpaquePayloadPhase;
  opaque.payload[0] = std::nanf("");
  opaque.payload[40] = INFINITY;
  opaque.payload[99] = -INFINITY;
  auto chunks = encode_message(opaque, kFingerprint, 1, limits);
  BufferPool pool;
  Reassembler r(pool);
  std::optional<Message> done;
  for (auto& c : chunks) {
    auto res = r.add("a", decode_ok(c, limits), slice(opaque, c));
    CHECK(res.rejections.empty());
    if (res.complete) done = std::move(res.complete);
  }
  REQUIRE(done);
  CHECK(std::memcmp(done->payload.data(), opaque.payload.data(), 100 * sizeof(float)) == 0);

  // An odd count of 6-byte elements leaves two bytes of padding, which must be zero.
  Message padded = opaque;
  padded.total = 65;  // 390 bytes in 98 words
  padded.payload.resize(98);
  padded.payload.back() = 0.0f;
  std::memset(reinterpret_cast<std::byte*>(padded.payload.data()) + 390, 0x01, 1);
  std::vector<RejectCause> padding_causes;
  for (auto& c : encode_message(padded, kFingerprint, 3, limits)) {
    auto res = r.add("a", decode_ok(c, limits), slice(padded, c));
    for (auto& rej : res.rejections) padding_causes.push_back(rej.cause);
    CHECK_FALSE(res.complete);
  }
  CHECK(padding_causes == std::vector<RejectCause>{RejectCause::kMalformed});

  // Only the first chunk's header decides: a float message whose later chunks claim the opaque phase
  // is still checked.
  Message plain = tensor_message(100, MessageKind::kCompressedShare);
  plain.phase = 0;
  plain.payload[77] = std::nanf("");
  std::vector<RejectCause> causes;
  auto plain_chunks = encode_message(plain, kFingerprint, 2, limits);
  for (std::size_t i = 0; i < plain_chunks.size(); ++i) {
    WireHeader h = decode_ok(plain_chunks[i], limits);
    if (i > 0) h.phase = kOpaquePayloadPhase;
    auto res = r.add("a", h, slice(plain, plain_chunks[i]));
    for (auto& rej : res.rejections) causes.push_back(rej.cause);
    CHECK_FALSE(res.complete);
  }
  CHECK(causes == std::vector<RejectCause>{RejectCause::kNonFinite});
}

TEST_CASE("decode_header names what is wrong with a bad frame", "[peer][wire][unit]") {
  const Message m = tensor_message(10);
  const auto good = encode_message(m, kFingerprint, 1, WireLimits{})[0];

  SECTION("oversized header") {
    WireLimits small;
    small.max_header_bytes = 8;
    CHECK(decode_cause(good.header, 40, small) == RejectCause::kOversized);
  }
  SECTION("garbage") { CHECK(decode_cause("\xff\xff\xff\xff", std::nullopt) == RejectCause::kMalformed); }
  SECTION("missing payload frame") { CHECK(decode_cause(good.header, std::nullopt) == RejectCause::kTruncated); }
  SECTION("short payload frame") { CHECK(decode_cause(good.header, 39) == RejectCause::kTruncated); }
  SECTION("long payload frame") { CHECK(decode_cause(good.header, 44) == RejectCause::kMalformed); }

  meridian::wire::Header h;
  REQUIRE(h.ParseFromString(good.header));
  SECTION("wrong protocol version") {
    h.set_protocol_version(kProtocolVersion + 1);
    CHECK(decode_cause(h.SerializeAsString(), 40) == RejectCause::kVersion);
  }
  SECTION("unknown kind") {
    h.set_kind(static_cast<meridian::wire::Kind>(99));
    CHECK(decode_cause(h.SerializeAsString(), 40) == RejectCause::kUnknownKind);
  }
  SECTION("payload above the cap") {
    WireLimits small;
    small.max_payload_elements = 9;
    CHECK(decode_cause(good.header, 40, small) == RejectCause::kOversized);
  }
  SECTION("chunk index beyond the count") {
    h.set_chunk_index(3);
    CHECK(decode_cause(h.SerializeAsString(), 40) == RejectCause::kMalformed);
  }
  SECTION("chunk slice beyond the payload") {
    h.set_chunk_offset(5);
    CHECK(decode_cause(h.SerializeAsString(), 40) == RejectCause::kMalformed);
  }
  SECTION("membership message carrying a tensor") {
    h.set_kind(meridian::wire::HEARTBEAT);
    CHECK(decode_cause(h.SerializeAsString(), 40) == RejectCause::kMalformed);
  }
}

TEST_CASE("membership bodies round-trip and reject malformed input", "[peer][wire][unit]") {
  HelloInfo hello{"oregon", "tcp://10.0.0.1:7000", "oregon", 99, 12, {}, {}};
  CHECK(std::get<HelloInfo>(decode_hello(encode_hello(hello))) == hello);
  MemberListInfo list;
  list.round = 5;
  list.members = {{"a", "tcp://x:1", "ohio", 3, MemberState::kAlive}, {"b", "", "", 4, MemberState::kLeft}};
  list.views = {View::of({"b", "a"}, 2, 30)};
  CHECK(decode_members(encode_members(list)) == list);
  CHECK(decode_heartbeat(encode_heartbeat({7, 8, 9, 10, 11})) == HeartbeatInfo{7, 8, 9, 10, 11});
  CHECK(decode_leave(encode_leave({9})) == LeaveInfo{9});

  CHECK(std::get<Rejection>(decode_hello(encode_hello(HelloInfo{}))).cause == RejectCause::kMalformed);  // no name
  CHECK_FALSE(decode_members("\x0a\xff\xff"));
  MemberListInfo unsorted;
  unsorted.views = {View{1, 1, {"b", "a"}, {}}};
  CHECK_FALSE(decode_members(encode_members(unsorted)));
}

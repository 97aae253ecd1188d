#include <catch2/catch.hpp>

#include <cmath>

#include "peer/message_validator.h"
#include "peer/opaque_payload.h"

using namespace meridian::peer;

namespace {

WireHeader push_sum(std::uint64_t round, double weight = 0.5, std::uint64_t total = 100) {
  WireHeader h;
  h.protocol_version = kProtocolVersion;
  h.model_fingerprint = 7;
  h.kind = MessageKind::kPushSum;
  h.round = round;
  h.total = total;
  h.payload_elements = total;
  h.weight = weight;
  return h;
}

std::optional<RejectCause> cause(const MessageValidator& v, const WireHeader& h) {
  auto r = v.check("peer", h);
  return r ? std::optional(r->cause) : std::nullopt;
}

}  // namespace

TEST_CASE("validator accepts tensors packing up to max_model_multiple model-sized vectors", "[peer][validate][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.model_elements = 100;
  p.max_model_multiple = 2;
  MessageValidator v(p);
  v.advance_round(20);
  CHECK_FALSE(cause(v, push_sum(20, 0.5, 200)));
  CHECK(cause(v, push_sum(21, 0.5, 300)) == RejectCause::kTensorLength);
  CHECK(cause(v, push_sum(22, 0.5, 150)) == RejectCause::kTensorLength);
}

TEST_CASE("validator accepts model-sized vectors followed by the model's normalization statistics",
          "[peer][validate][norm-state][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.model_elements = 100;
  p.max_model_multiple = 2;
  p.state_elements = 6;
  MessageValidator v(p);
  v.advance_round(20);
  CHECK_FALSE(cause(v, push_sum(20, 0.5, 100)));
  CHECK_FALSE(cause(v, push_sum(21, 0.5, 106)));
  CHECK_FALSE(cause(v, push_sum(22, 0.5, 206)));
  CHECK(cause(v, push_sum(23, 0.5, 6)) == RejectCause::kTensorLength);  // statistics alone
  CHECK(cause(v, push_sum(24, 0.5, 105)) == RejectCause::kTensorLength);
  CHECK(cause(v, push_sum(25, 0.5, 306)) == RejectCause::kTensorLength);
  const auto r = v.check("s1", push_sum(26, 0.5, 112));
  REQUIRE(r);
  CHECK(r->detail.find("100 parameters and 6 normalization statistics") != std::string::npos);
}

TEST_CASE("validator checks fingerprint, length, weight, round window and replay", "[peer][validate][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.model_elements = 100;
  p.rounds_behind = 4;
  p.rounds_ahead = 10;
  MessageValidator v(p);
  v.advance_round(20);

  CHECK_FALSE(cause(v, push_sum(20)));

  auto wrong_fp = push_sum(20);
  wrong_fp.model_fingerprint = 8;
  CHECK(cause(v, wrong_fp) == RejectCause::kFingerprint);

  CHECK(cause(v, push_sum(20, 0.5, 99)) == RejectCause::kTensorLength);
  CHECK(cause(v, push_sum(20, 0.5, 200)) == RejectCause::kTensorLength);
  auto outside = push_sum(20);
  outside.offset = 50;  // 100 elements from offset 50 do not fit in 100
  CHECK(cause(v, outside) == RejectCause::kTensorLength);

  CHECK(cause(v, push_sum(20, std::nan(""))) == RejectCause::kNonFinite);
  CHECK(cause(v, push_sum(20, -1.0)) == RejectCause::kWeightRange);
  CHECK(cause(v, push_sum(20, 0.0)) == RejectCause::kWeightRange);
  CHECK(cause(v, push_sum(20, 1e9)) == RejectCause::kWeightRange);

  CHECK_FALSE(cause(v, push_sum(16)));
  CHECK(cause(v, push_sum(15)) == RejectCause::kRoundStale);
  CHECK_FALSE(cause(v, push_sum(30)));
  CHECK(cause(v, push_sum(31)) == RejectCause::kRoundAhead);

  // Replay: the same message (kind, view, round, tag, phase, offset) from the same sender.
  Message seen = push_sum(20).to_message();
  v.accept("peer", seen);
  CHECK(cause(v, push_sum(20)) == RejectCause::kReplayed);
  CHECK_FALSE(v.check("other", push_sum(20)));
  auto next_phase = push_sum(20);
  next_phase.phase = 1;
  CHECK_FALSE(cause(v, next_phase));
  v.forget("peer");
  CHECK_FALSE(cause(v, push_sum(20)));
}

TEST_CASE("validator takes an opaque payload only whole: offset 0 and the words 6 bytes an element fill",
          "[peer][validate][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.model_elements = 100;
  MessageValidator v(p);
  auto opaque = [](std::uint64_t words, std::uint64_t offset = 0, std::uint64_t total = 100) {
    WireHeader h = push_sum(0, 0.5, total);
    h.kind = MessageKind::kCompressedShare;
    h.phase = kOpaquePayloadPhase;
    h.payload_elements = words;
    h.offset = offset;
    return h;
  };
  // 6 bytes a value: 150 words for 100 values, more than a float payload may hold.
  CHECK_FALSE(cause(v, opaque(150)));
  CHECK(cause(v, opaque(149)) == RejectCause::kTensorLength);
  CHECK(cause(v, opaque(151)) == RejectCause::kTensorLength);
  CHECK(cause(v, opaque(150, 1)) == RejectCause::kTensorLength);
  CHECK(cause(v, opaque(150, 0, 99)) == RejectCause::kTensorLength);
  // A length whose byte count would overflow.
  ValidationPolicy any = p;
  any.model_elements = 0;
  MessageValidator unbounded(any);
  CHECK(unbounded.check("peer", opaque(6, 0, std::uint64_t{1} << 62))->cause == RejectCause::kTensorLength);
  // The same words in a float share do not fit.
  auto dense = opaque(150);
  dense.phase = 0;
  CHECK(cause(v, dense) == RejectCause::kTensorLength);
}

TEST_CASE("validator checks only the fingerprint on membership kinds and later chunks", "[peer][validate][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.model_elements = 100;
  MessageValidator v(p);
  WireHeader hb;
  hb.kind = MessageKind::kHeartbeat;
  hb.model_fingerprint = 7;
  hb.round = 1u << 30;
  CHECK_FALSE(v.check("x", hb));
  hb.model_fingerprint = 1;
  CHECK(v.check("x", hb)->cause == RejectCause::kFingerprint);

  auto later = push_sum(0, -5.0, 3);
  later.chunk_index = 1;
  later.chunk_count = 2;
  CHECK_FALSE(v.check("x", later));
}

TEST_CASE("validator forgets replay records that fell out of the window", "[peer][validate][unit]") {
  ValidationPolicy p;
  p.model_fingerprint = 7;
  p.rounds_behind = 2;
  MessageValidator v(p);
  v.accept("peer", push_sum(1).to_message());
  CHECK(cause(v, push_sum(1)) == RejectCause::kReplayed);
  v.advance_round(10);
  CHECK(cause(v, push_sum(1)) == RejectCause::kRoundStale);
  v.advance_round(5);  // never backwards
  CHECK(v.round() == 10);
}

// Randomized robustness test of the receive pipeline: 100,000+ mutated frames built from valid ones
// and from the seed corpus in tests/fuzz/corpus/wire_decoder/. Passing means no crash, no hang, no sanitizer
// report (run it under `make sanitize`), and the pipeline still accepts valid input afterwards.
// Also checks that the stored seed corpus (tests/fuzz/corpus/wire_decoder/) is current, and that every kept hostile
// input (tests/fuzz/regressions/wire_decoder/: inputs that once crashed the libFuzzer target, and crafted lies about
// lengths, counts and kinds) is refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <variant>

#include "proto/meridian.pb.h"
#include "tests/peer/wire_input.h"
#include "tests/support/build_paths.h"

using namespace meridian::peer;
using meridian::tests::wire_input;
using meridian::tests::WirePipeline;
namespace fs = std::filesystem;
namespace wire = meridian::wire;

namespace {

const fs::path kCorpus = fs::path(meridian::tests::source_dir()) / "tests" / "fuzz" / "corpus" / "wire_decoder";
const fs::path kRegressions =
    fs::path(meridian::tests::source_dir()) / "tests" / "fuzz" / "regressions" / "wire_decoder";

std::vector<std::string> valid_inputs() {
  std::vector<std::string> out;
  const auto limits = WirePipeline::limits();
  const auto fp = WirePipeline::policy().model_fingerprint;
  std::uint64_t id = 1;
  for (auto kind : {MessageKind::kPushSum, MessageKind::kReduceChunk, MessageKind::kGroupChunk}) {
    for (std::size_t n : {1, 7, 64, 200}) {
      Message m;
      m.kind = kind;
      m.round = 50;
      m.tag = static_cast<std::uint32_t>(n);
      m.total = n + 3;
      m.offset = 3;
      m.weight = 0.5;
      m.payload.assign(n, 1.5f);
      for (const auto& c : encode_message(m, fp, id++, limits)) {
        const std::string payload(reinterpret_cast<const char*>(m.payload.data() + c.offset), c.elements * 4);
        out.push_back(wire_input(c.header, c.elements ? &payload : nullptr));
      }
    }
  }
  MemberListInfo list;
  list.members = {{"a", "tcp://127.0.0.1:1", "ohio", 3, MemberState::kAlive}, {"b", "", "", 1, MemberState::kDead}};
  list.views = {View::of({"a", "b"}, 1, 10)};
  const std::pair<MessageKind, std::string> bodies[] = {
      {MessageKind::kHello, encode_hello({"a", "tcp://127.0.0.1:1", "tokyo", 1, 2, {{"model", "mlp|in=784x1x1"}}, ""})},
      {MessageKind::kMembers, encode_members(list)},
      {MessageKind::kHeartbeat, encode_heartbeat({1, 2})},
      {MessageKind::kLeave, encode_leave({1})},
      {MessageKind::kControl, std::string("\x0a\x04ping", 6)},
  };
  for (const auto& [kind, body] : bodies) {
    Message m;
    m.kind = kind;
    m.body = body;
    out.push_back(wire_input(encode_message(m, fp, id++, limits)[0].header, nullptr));
  }
  return out;
}

// Near-valid inputs: one field or frame wrong in each, so that the fuzzer starts next to every
// rejection path (the cause each should meet is in the comment).
std::vector<std::string> near_valid_inputs() {
  std::vector<std::string> out;
  const auto limits = WirePipeline::limits();
  const auto fp = WirePipeline::policy().model_fingerprint;
  std::uint64_t id = 1000;
  auto push_sum = [](std::size_t n) {
    Message m;
    m.kind = MessageKind::kPushSum;
    m.round = 50;
    m.total = n;
    m.weight = 0.5;
    m.payload.assign(n, 0.25f);
    return m;
  };
  auto one = [&](const Message& m, std::uint64_t fingerprint = 0) {
    const auto c = encode_message(m, fingerprint ? fingerprint : fp, id++, limits)[0];
    const std::string payload(reinterpret_cast<const char*>(m.payload.data() + c.offset), c.elements * 4);
    return std::pair{c.header, payload};
  };
  auto [header, payload] = one(push_sum(16));
  out.push_back(wire_input(header, nullptr));  // truncated: payload frame missing
  const std::string short_payload = payload.substr(0, 10);
  out.push_back(wire_input(header, &short_payload));  // truncated payload frame
  const std::string long_payload = payload + "xxxx";
  out.push_back(wire_input(header, &long_payload));                          // payload longer than the header says
  out.push_back(wire_input(header.substr(0, header.size() / 2), &payload));  // header cut in half
  {
    auto [h, p] = one(push_sum(16), fp + 1);  // wrong model fingerprint
    out.push_back(wire_input(h, &p));
  }
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Message m = push_sum(16);
    m.payload[5] = bad;  // non-finite payload
    auto [h, p] = one(m);
    out.push_back(wire_input(h, &p));
  }
  for (double w : {1e300, -1.0, 0.0, std::numeric_limits<double>::quiet_NaN()}) {
    Message m = push_sum(16);
    m.weight = w;  // weight out of range or not finite
    auto [h, p] = one(m);
    out.push_back(wire_input(h, &p));
  }
  for (std::uint64_t round : {std::uint64_t{0}, std::uint64_t{1} << 40}) {
    Message m = push_sum(16);
    m.round = round;  // stale, far ahead
    auto [h, p] = one(m);
    out.push_back(wire_input(h, &p));
  }
  {
    Message m = push_sum(16);
    m.offset = 10;  // slice outside the tensor
    auto [h, p] = one(m);
    out.push_back(wire_input(h, &p));
  }
  {
    auto chunks = encode_message(push_sum(200), fp, id++, limits);  // a chunked message without its middle
    for (std::size_t i : {std::size_t{0}, chunks.size() - 1}) {
      const std::string p(chunks[i].elements * 4, '\0');
      out.push_back(wire_input(chunks[i].header, &p));
    }
  }
  {
    Message m;
    m.kind = MessageKind::kHeartbeat;
    m.body = std::string("\xff\xff\xff", 3);  // body that is not a Heartbeat
    out.push_back(wire_input(one(m).first, nullptr));
    m.kind = MessageKind::kHello;
    m.body = encode_hello({"bad name!", "", "", 1, 2, {}, {}});  // invalid site name
    out.push_back(wire_input(one(m).first, nullptr));
    m.kind = MessageKind::kHeartbeat;
    m.body = encode_heartbeat({1, 2});
    const std::string stray(8, '\0');
    out.push_back(wire_input(one(m).first, &stray));  // membership kind with a payload
  }
  out.push_back(wire_input(std::string(100, '\xff'), nullptr));  // not protobuf at all
  return out;
}

// The files of `dir` whose names start with `prefix` (hidden files excepted), by name.
std::map<std::string, std::string> stored_by_name(const fs::path& dir, const std::string& prefix = "") {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (!e.is_regular_file() || name.starts_with(".") || !name.starts_with(prefix)) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    out[name] = s.str();
  }
  return out;
}

std::vector<std::string> stored(const fs::path& dir, const std::string& prefix = "") {
  std::vector<std::string> out;
  for (auto& [name, input] : stored_by_name(dir, prefix)) out.push_back(std::move(input));
  return out;
}

bool feed(WirePipeline& pipeline, const std::string& input) {
  return pipeline.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

// The header of an input split as WirePipeline::feed splits it, or the codec's rejection.
std::variant<WireHeader, Rejection> header_of(const std::string& input) {
  if (input.size() < 2) return Rejection{RejectCause::kTruncated, "no length prefix"};
  const auto* data = reinterpret_cast<const std::uint8_t*>(input.data());
  const std::size_t len = std::min<std::size_t>(input.size() - 2, data[0] | (std::size_t{data[1]} << 8));
  std::optional<std::size_t> payload_bytes;
  if (input.size() > 2 + len) payload_bytes = input.size() - 2 - len;
  return decode_header({reinterpret_cast<const std::byte*>(data + 2), len}, payload_bytes, WirePipeline::limits());
}

// True when the receive path would let `input` through to gossip/ or membership: a complete mixer
// message after the validator, or a membership message whose body decodes.
bool let_through(const std::string& input) {
  WirePipeline fresh;
  if (feed(fresh, input)) return true;
  const auto decoded = header_of(input);
  const auto* header = std::get_if<WireHeader>(&decoded);
  if (header == nullptr || is_mixer_kind(header->kind)) return false;
  switch (header->kind) {
    case MessageKind::kHello: return std::holds_alternative<HelloInfo>(decode_hello(header->body));
    case MessageKind::kMembers: return decode_members(header->body).has_value();
    case MessageKind::kHeartbeat: return decode_heartbeat(header->body).has_value();
    case MessageKind::kLeave: return decode_leave(header->body).has_value();
    default: return true;  // no body decoder in the receive path: nothing refuses it
  }
}

// A valid push-sum header of `n` elements as the wire schema spells it, for crafting lies from.
wire::Header push_sum_header(std::uint64_t n) {
  wire::Header h;
  h.set_protocol_version(kProtocolVersion);
  h.set_model_fingerprint(WirePipeline::policy().model_fingerprint);
  h.set_kind(wire::PUSH_SUM);
  h.set_message_id(1);
  h.set_chunk_index(0);
  h.set_chunk_count(1);
  h.set_chunk_elements(n);
  h.set_payload_elements(n);
  h.set_round(50);
  h.set_total(n);
  h.set_weight(0.5);
  return h;
}

// Hostile inputs, each a lie that one check of the receive path must catch, by the name of its file in
// tests/fuzz/regressions/wire_decoder/.
std::map<std::string, std::string> hostile_inputs() {
  std::map<std::string, std::string> out;
  const std::string floats16(16 * 4, '\0');
  auto with = [&](const std::string& name, const wire::Header& h, const std::string* payload) {
    out[name] = wire_input(h.SerializeAsString(), payload);
  };
  auto membership = [&](const std::string& name, wire::Kind kind, const std::string& body) {
    wire::Header h = push_sum_header(0);
    h.set_kind(kind);
    h.set_body(body);
    with(name, h, nullptr);
  };
  {
    auto h = push_sum_header(16);
    h.set_payload_elements(std::uint64_t{1} << 62);  // an allocation of 2^64 bytes if believed
    h.set_chunk_elements(std::uint64_t{1} << 62);
    with("huge-payload-count.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_chunk_offset(std::numeric_limits<std::uint64_t>::max() - 1);  // offset + elements wraps to 14
    h.set_chunk_elements(16);
    with("chunk-offset-wraps.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_chunk_count(0);
    with("chunk-count-zero.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_chunk_index(7);
    h.set_chunk_count(2);
    with("chunk-index-past-count.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_chunk_count(1000);  // more chunks than elements
    h.set_chunk_elements(1);
    const std::string one(4, '\0');
    with("more-chunks-than-elements.bin", h, &one);
  }
  {
    auto h = push_sum_header(16);
    const std::string short_payload(63, '\0');
    with("payload-one-byte-short.bin", h, &short_payload);
    const std::string odd_payload(65, '\0');
    with("payload-not-whole-floats.bin", h, &odd_payload);
    with("payload-frame-missing.bin", h, nullptr);
  }
  {
    auto h = push_sum_header(16);
    h.set_protocol_version(kProtocolVersion + 1);
    with("next-protocol-version.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_kind(static_cast<wire::Kind>(99));
    with("unknown-kind.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(16);
    h.set_offset(std::numeric_limits<std::uint64_t>::max() - 8);  // offset + elements wraps past total
    with("tensor-offset-wraps.bin", h, &floats16);
  }
  {
    auto h = push_sum_header(4);
    h.set_kind(wire::HEARTBEAT);  // a membership kind with a tensor
    h.set_body(encode_heartbeat({1, 2}));
    const std::string four(16, '\0');
    with("membership-with-payload.bin", h, &four);
  }
  {
    const auto header = push_sum_header(16).SerializeAsString();
    out["length-prefix-past-end.bin"] = std::string("\xff\xff", 2) + header.substr(0, 7);  // cut inside a field
    out["header-over-cap.bin"] = std::string("\x20\x4e", 2) + std::string(20000, '\x08');  // 20,000 > 16 KiB
    out["one-byte.bin"] = std::string(1, '\x05');
    out["empty.bin"] = "";
  }
  membership("hello-name-too-long.bin", wire::HELLO, encode_hello({std::string(10000, 'a'), "", "", 1, 2, {}, ""}));
  // A MemberList whose first member claims 2^32 - 1 bytes, with four present.
  membership("members-length-past-end.bin", wire::MEMBERS, std::string("\x0a\xff\xff\xff\xff\x0f\x0a\x01\x61\x00", 10));
  {
    wire::MemberList list;  // one view more than a member list may carry
    for (int i = 0; i < 65; ++i) {
      auto* view = list.add_views();
      view->set_id(static_cast<std::uint64_t>(i + 1));
      view->add_members("a");
    }
    membership("members-too-many-views.bin", wire::MEMBERS, list.SerializeAsString());
  }
  {
    wire::MemberList list;
    auto* view = list.add_views();
    view->set_id(1);
    for (const char* name : {"b", "a"}) view->add_members(name);  // not in canonical (sorted) order
    membership("members-view-unsorted.bin", wire::MEMBERS, list.SerializeAsString());
  }
  membership("heartbeat-varint-unterminated.bin", wire::HEARTBEAT, std::string("\x08\xff\xff\xff", 4));
  membership("leave-wrong-wire-type.bin", wire::LEAVE, std::string("\x0d\x01", 2));  // fixed32 cut short
  return out;
}

std::string mutate(std::string s, std::mt19937_64& rng, const std::vector<std::string>& pool) {
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(7)) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1:  // overwrite a byte with an interesting value
        if (!s.empty())
          s[pick(s.size())] = static_cast<char>(std::array<int, 6>{0, 1, 0x7f, 0x80, 0xff, 0x08}[pick(6)]);
        break;
      case 2:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 3:  // append random bytes
        for (std::size_t i = pick(16); i > 0; --i) s.push_back(static_cast<char>(pick(256)));
        break;
      case 4:  // splice with another input
      {
        const auto& other = pool[pick(pool.size())];
        s = s.substr(0, pick(s.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      case 5:  // change the header length prefix
        if (s.size() >= 2) s[pick(2)] = static_cast<char>(pick(256));
        break;
      case 6:  // duplicate a slice
        if (!s.empty()) {
          const auto at = pick(s.size());
          s.insert(at, s.substr(at, pick(8)));
        }
        break;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("the receive pipeline survives 100,000 mutated frames and still accepts valid ones",
          "[peer][wire][fuzz][unit]") {
  auto seeds = valid_inputs();
  const auto corpus = stored(kCorpus);
  CHECK(corpus.size() >= 8);
  seeds.insert(seeds.end(), corpus.begin(), corpus.end());

  std::mt19937_64 rng(20261122);
  WirePipeline pipeline;
  std::size_t accepted = 0;
  constexpr std::size_t kFrames = 120'000;
  for (std::size_t i = 0; i < kFrames; ++i) {
    const auto& seed = seeds[i % seeds.size()];
    const std::string input = mutate(seed, rng, seeds);
    accepted += pipeline.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  // Some mutations leave a message valid (a flipped payload bit is still a finite float); most do not.
  CHECK(accepted < kFrames);
  CHECK(accepted > 0);

  // A fresh message still goes through the same pipeline (new round, so not a replay).
  Message m;
  m.kind = MessageKind::kPushSum;
  m.round = 60;
  m.tag = 999;
  m.total = 4;
  m.weight = 1.0;
  m.payload = {1, 2, 3, 4};
  auto c = encode_message(m, WirePipeline::policy().model_fingerprint, 1u << 30, WirePipeline::limits())[0];
  const std::string payload(reinterpret_cast<const char*>(m.payload.data()), 16);
  const auto input = wire_input(c.header, &payload);
  CHECK(pipeline.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
}

TEST_CASE("the stored seed corpus is current: its valid seeds are accepted, its near-valid ones refused",
          "[peer][wire][fuzz][unit]") {
  INFO("after a change of the wire format or of the inputs above, regenerate: build/meridian_tests \"[.corpus]\"");
  const auto valid = stored(kCorpus, "valid-");
  const auto near = stored(kCorpus, "near-");
  REQUIRE(valid.size() == valid_inputs().size());
  REQUIRE(near.size() == near_valid_inputs().size());

  // The seeds of the three mixer kinds at four sizes are, in name order, whole messages: every header
  // decodes, and each message (chunked or not) is accepted once its last chunk arrives.
  constexpr std::size_t kWholeMessages = 3 * 4;
  WirePipeline pipeline;
  std::size_t accepted = 0;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    INFO("valid seed " << i);
    const auto header = header_of(valid[i]);
    if (const auto* rejection = std::get_if<Rejection>(&header)) FAIL("header refused: " << rejection->detail);
    accepted += feed(pipeline, valid[i]);
  }
  CHECK(accepted == kWholeMessages);
  for (std::size_t i = 0; i < near.size(); ++i) {
    INFO("near-valid seed " << i);
    WirePipeline fresh;
    CHECK_FALSE(feed(fresh, near[i]));
  }
}

TEST_CASE("every kept hostile input is refused and leaves the pipeline working", "[peer][wire][fuzz][unit]") {
  const auto regressions = stored_by_name(kRegressions);
  // The crafted ones at least; inputs that crashed the libFuzzer target are added next to them.
  REQUIRE(regressions.size() >= hostile_inputs().size());
  // The crafted ones are lies told in a header that is accepted as it is, so each is refused for its lie.
  const std::string floats16(16 * 4, '\0');
  REQUIRE(let_through(wire_input(push_sum_header(16).SerializeAsString(), &floats16)));
  WirePipeline pipeline;  // one long-lived connection that receives them all
  for (const auto& [name, input] : regressions) {
    INFO(name);
    CHECK_FALSE(let_through(input));
    CHECK_FALSE(feed(pipeline, input));
  }
  // A fresh message still goes through the same pipeline.
  Message m;
  m.kind = MessageKind::kPushSum;
  m.round = 60;
  m.total = 4;
  m.weight = 1.0;
  m.payload = {1, 2, 3, 4};
  const auto c = encode_message(m, WirePipeline::policy().model_fingerprint, 1u << 30, WirePipeline::limits())[0];
  const std::string payload(reinterpret_cast<const char*>(m.payload.data()), 16);
  CHECK(feed(pipeline, wire_input(c.header, &payload)));
}

// Regenerates the seed corpus (run it after changing the wire format or the inputs above):
//   build/meridian_tests "[.corpus]"
TEST_CASE("write the wire seed corpus", "[.corpus]") {
  fs::remove_all(kCorpus);
  fs::create_directories(kCorpus);
  auto write_all = [](const std::vector<std::string>& inputs, const char* prefix) {
    int i = 0;
    for (const auto& input : inputs) {
      char name[32];
      std::snprintf(name, sizeof name, "%s-%02d.bin", prefix, i++);
      std::ofstream(kCorpus / name, std::ios::binary) << input;
    }
  };
  write_all(valid_inputs(), "valid");
  write_all(near_valid_inputs(), "near");
}

// Writes the crafted hostile inputs into tests/fuzz/regressions/wire_decoder/ (inputs kept from libFuzzer crashes
// stay): build/meridian_tests "[.regressions]"
TEST_CASE("write the crafted hostile wire inputs", "[.regressions]") {
  fs::create_directories(kRegressions);
  for (const auto& [name, input] : hostile_inputs()) std::ofstream(kRegressions / name, std::ios::binary) << input;
}

// Randomized robustness test of the receive pipeline: 100,000+ mutated frames built from valid ones
// and from the seed corpus in tests/fuzz/corpus/. Passing means no crash, no hang, no sanitizer
// report (run it under `make sanitize`), and the pipeline still accepts valid input afterwards.
// Also replays every stored input (the corpus and tests/fuzz/regressions/, where inputs that once
// crashed the libFuzzer target are kept) through the pipeline.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "tests/peer/wire_input.h"

using namespace meridian::peer;
using meridian::testing::wire_input;
using meridian::testing::WirePipeline;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(MERIDIAN_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
const fs::path kRegressions = fs::path(MERIDIAN_SOURCE_DIR) / "tests" / "fuzz" / "regressions";

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

std::vector<std::string> stored(const fs::path& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string().starts_with(".")) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    out.push_back(s.str());
  }
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

TEST_CASE("every stored corpus and regression input goes through the pipeline without harm",
          "[peer][wire][fuzz][unit]") {
  auto inputs = stored(kCorpus);
  const auto regressions = stored(kRegressions);
  inputs.insert(inputs.end(), regressions.begin(), regressions.end());
  REQUIRE(inputs.size() >= valid_inputs().size());
  WirePipeline pipeline;
  std::size_t accepted = 0;
  for (const auto& input : inputs)
    accepted += pipeline.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  // The valid seeds are accepted (each once: a second copy would be a replay); no near-valid one is.
  std::size_t whole_valid_messages = 0;
  for (const auto& input : valid_inputs()) {
    WirePipeline fresh;
    whole_valid_messages += fresh.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  CHECK(accepted <= whole_valid_messages);
  for (const auto& input : near_valid_inputs()) {
    WirePipeline fresh;
    CHECK_FALSE(fresh.feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()));
  }
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

// Randomized robustness test of the receive pipeline: 100,000+ mutated frames built from valid ones
// and from the seed corpus in tests/peer/wire_corpus/. Passing means no crash, no hang, no sanitizer
// report (run it under `make sanitize`), and the pipeline still accepts valid input afterwards.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/peer/wire_input.h"

using namespace meridian::peer;
using meridian::testing::WirePipeline;
using meridian::testing::wire_input;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(MERIDIAN_SOURCE_DIR) / "tests" / "peer" / "wire_corpus";

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
      {MessageKind::kHello, encode_hello({"a", "tcp://127.0.0.1:1", "tokyo", 1, 2})},
      {MessageKind::kMembers, encode_members(list)},
      {MessageKind::kHeartbeat, encode_heartbeat({1, 2})},
      {MessageKind::kLeave, encode_leave({1})},
  };
  for (const auto& [kind, body] : bodies) {
    Message m;
    m.kind = kind;
    m.body = body;
    out.push_back(wire_input(encode_message(m, fp, id++, limits)[0].header, nullptr));
  }
  return out;
}

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  if (!fs::exists(kCorpus)) return out;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
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
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(std::array<int, 6>{0, 1, 0x7f, 0x80, 0xff, 0x08}[pick(6)]);
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

TEST_CASE("the receive pipeline survives 100,000 mutated frames and still accepts valid ones", "[peer][wire][fuzz]") {
  auto seeds = valid_inputs();
  const auto stored = corpus();
  CHECK(stored.size() >= 8);
  seeds.insert(seeds.end(), stored.begin(), stored.end());

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

// Regenerates the seed corpus: build/meridian_tests "[.corpus]"
TEST_CASE("write the wire seed corpus", "[.corpus]") {
  fs::create_directories(kCorpus);
  int i = 0;
  for (const auto& input : valid_inputs()) {
    char name[32];
    std::snprintf(name, sizeof name, "seed-%02d.bin", i++);
    std::ofstream(kCorpus / name, std::ios::binary) << input;
  }
}

// Secure aggregation (privacy/): pair secrets from CurveZMQ keys, masks that cancel, the fixed-point
// encoding, the independence of one masked share from its sender's values, and the masked mean over
// real ZeroMQ sites: equal bit for bit to the unmasked fixed-point mean, redone with fresh masks when a
// site crashes, and unharmed by malformed, stale and replayed shares.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include <zmq.h>

#include "gossip/inbox.h"
#include "peer/adaptive_deadline.h"
#include "peer/opaque_payload.h"
#include "privacy/fixed_point.h"
#include "privacy/packed_share.h"
#include "privacy/pair_keys.h"
#include "privacy/pairwise_mask.h"
#include "privacy/secure_mean_mixer.h"
#include "tests/privacy/curve_federation.h"

using namespace meridian;
using namespace meridian::privacy;
using namespace std::chrono_literals;
using testing::CurveFederation;

namespace {

std::unique_ptr<PairKeys> keys_for(const std::map<std::string, peer::CurveKeyPair>& all, const std::string& self) {
  return std::make_unique<PairKeys>(all.at(self), [&all](const std::string& name) -> std::optional<std::string> {
    auto it = all.find(name);
    if (it == all.end()) return std::nullopt;
    return it->second.public_key;
  });
}

std::vector<float> random_values(std::size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Chi-square statistic of a 2 x 16 contingency table: the sender's secret bit against the top four
// bits of the 48-bit lane a receiver sees. 15 degrees of freedom; above 60 the bit and the lane are
// dependent with p < 1e-6.
double chi_square_bit_vs_lane(const std::vector<int>& bits, const std::vector<std::uint64_t>& lanes) {
  double table[2][16] = {};
  for (std::size_t i = 0; i < bits.size(); ++i) table[bits[i]][((lanes[i] & kLaneMask) >> (kLaneBits - 4)) & 15] += 1;
  double rows[2] = {}, cols[16] = {}, total = 0;
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 16; ++c) {
      rows[b] += table[b][c];
      cols[c] += table[b][c];
      total += table[b][c];
    }
  double chi = 0;
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 16; ++c) {
      const double expected = rows[b] * cols[c] / total;
      if (expected > 0) chi += (table[b][c] - expected) * (table[b][c] - expected) / expected;
    }
  return chi;
}

constexpr double kChiSquareDependent = 60.0;

}  // namespace

TEST_CASE("pair secrets from CurveZMQ keys are symmetric and differ between pairs", "[privacy][unit]") {
  const auto a = peer::generate_curve_key_pair(), b = peer::generate_curve_key_pair(),
             c = peer::generate_curve_key_pair();
  CHECK(derive_pair_key(a, b.public_key) == derive_pair_key(b, a.public_key));
  CHECK(derive_pair_key(a, c.public_key) == derive_pair_key(c, a.public_key));
  CHECK(derive_pair_key(a, b.public_key) != derive_pair_key(a, c.public_key));
  CHECK(derive_pair_key(b, c.public_key) != derive_pair_key(a, c.public_key));
  CHECK_THROWS_AS(derive_pair_key(a, "not a key"), PairKeyError);
  // The all-zero point is of low order: X25519 refuses it instead of yielding a predictable secret.
  char zero_z85[41];
  const std::array<unsigned char, 32> zero{};
  REQUIRE(zmq_z85_encode(zero_z85, zero.data(), zero.size()) != nullptr);
  CHECK_THROWS_AS(derive_pair_key(a, zero_z85), PairKeyError);
}

TEST_CASE("every site's masks of a round cancel exactly in the sum, and differ between rounds", "[privacy][unit]") {
  const auto names = testing::site_names(5);
  std::map<std::string, peer::CurveKeyPair> all;
  for (const auto& n : names) all[n] = peer::generate_curve_key_pair();
  const std::size_t n = 3001;  // not a multiple of the keystream block
  const MaskRound round{7, 42, 0, 0};
  std::vector<std::uint64_t> sum(n, 0);
  std::vector<std::vector<std::uint64_t>> masks;
  for (const auto& self : names) {
    std::vector<std::uint64_t> lanes(n, 0);
    mask_share(self, names, *keys_for(all, self), round, lanes);
    for (std::size_t i = 0; i < n; ++i) sum[i] += lanes[i];
    masks.push_back(lanes);
  }
  CHECK(sum == std::vector<std::uint64_t>(n, 0));
  CHECK(masks[0] != std::vector<std::uint64_t>(n, 0));
  // A redo in the next view, and any other round, gets other masks.
  for (const MaskRound other :
       {MaskRound{8, 42, 0, 0}, MaskRound{7, 43, 0, 0}, MaskRound{7, 42, 1, 0}, MaskRound{7, 42, 0, 1}}) {
    std::vector<std::uint64_t> lanes(n, 0);
    mask_share(names[0], names, *keys_for(all, names[0]), other, lanes);
    CHECK(lanes != masks[0]);
  }
}

TEST_CASE("the fixed-point encoding rounds to 2^-24, clips at its range and counts what it changed",
          "[privacy][unit]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.1f, 1e6f, -1e6f, nan, inf, -inf};
  std::vector<std::uint64_t> lanes(values.size());
  const auto counts = encode(values, lanes);
  CHECK(counts.clipped == 2);
  CHECK(counts.non_finite == 3);
  std::vector<float> back(values.size());
  decode_mean(lanes, 1, back);
  CHECK(back[0] == 0.0f);
  CHECK(back[1] == 1.0f);
  CHECK(back[2] == -2.5f);
  CHECK(std::abs(back[3] - 0.1f) <= std::ldexp(1.0f, -24));
  CHECK(back[4] == static_cast<float>(kClip));
  CHECK(back[5] == static_cast<float>(-kClip));
  CHECK(back[6] == 0.0f);
  CHECK(back[7] == 0.0f);
  // kMaxSites values at either end of the range still sum without wrapping.
  std::vector<std::uint64_t> sum(2, 0);
  for (std::size_t s = 0; s < kMaxSites; ++s) {
    sum[0] += lanes[4];
    sum[1] += lanes[5];
  }
  std::vector<float> mean(2);
  decode_mean(sum, kMaxSites, mean);
  CHECK(mean[0] == static_cast<float>(kClip));
  CHECK(mean[1] == static_cast<float>(-kClip));
}

TEST_CASE("a masked share travels as 6 bytes a value, and the packed shares' mean is the fixed-point mean",
          "[privacy][unit]") {
  const auto names = testing::site_names(5);
  std::map<std::string, peer::CurveKeyPair> all;
  for (const auto& name : names) all[name] = peer::generate_curve_key_pair();
  // Sizes around the masking's blocks of 1024 lanes, odd (two bytes of padding) and even.
  const std::size_t n = GENERATE(as<std::size_t>{}, 1, 2, 3, 4, 5, 1023, 1024, 1025, 3001, 4100);
  INFO(n << " values");
  CHECK(packed_words(n) * 4 == n * 6 + (n % 2 == 0 ? 0 : 2));
  const MaskRound round{4, 9, 0, 0};
  std::vector<std::vector<float>> data;
  for (std::size_t r = 0; r < names.size(); ++r) data.push_back(random_values(n, 500 + static_cast<unsigned>(r), 2.0f));
  std::vector<std::span<const float>> inputs(data.begin(), data.end());
  std::vector<float> expected(n);
  plain_fixed_point_mean(inputs, expected);

  std::vector<std::vector<std::uint64_t>> own(names.size());
  std::vector<std::vector<float>> packed(names.size());
  for (std::size_t r = 0; r < names.size(); ++r) {
    auto keys = keys_for(all, names[r]);
    std::vector<std::uint64_t> lanes(n);
    encode(data[r], lanes);
    own[r].resize(n);
    // Two receivers' buffers, the second full of ones: each gets the whole share, padding included.
    packed[r].assign(packed_words(n), 0.0f);
    std::vector<float> second(packed_words(n), 1.0f);
    const std::vector<std::span<float>> outs = {packed[r], second};
    mask_and_pack(names[r], names, *keys, round, lanes, own[r], outs);
    CHECK(std::memcmp(second.data(), packed[r].data(), second.size() * sizeof(float)) == 0);
    // The same lanes as masking the whole tensor at once, and the bytes are those lanes' low 48 bits:
    // the low 32 bits of every lane, then the high 16 bits of every lane.
    std::vector<std::uint64_t> whole = lanes;
    mask_share(names[r], names, *keys, round, whole);
    CHECK(own[r] == whole);
    const auto bytes = std::as_bytes(std::span<const float>(packed[r]));
    for (std::size_t i = 0; i < n; i += 7) {
      std::uint64_t low = 0, high = 0;
      std::memcpy(&low, bytes.data() + i * 4, 4);
      std::memcpy(&high, bytes.data() + n * 4 + i * 2, 2);
      CHECK((low | (high << 32)) == (whole[i] & kLaneMask));
    }
    CHECK(is_packed_share(packed[r], n));
  }
  // Any site's own lanes plus the others' packed shares: the unmasked fixed-point mean, bit for bit.
  for (std::size_t r = 0; r < names.size(); ++r) {
    std::vector<std::span<const float>> others;
    for (std::size_t k = 0; k < names.size(); ++k)
      if (k != r) others.emplace_back(packed[k]);
    std::vector<float> mean(n);
    decode_packed_mean(own[r], others, mean);
    CHECK(std::memcmp(mean.data(), expected.data(), n * sizeof(float)) == 0);
  }
  // What a receiver refuses: a word short or over, and (n odd) padding that is not zero.
  auto shorter = packed[0];
  shorter.pop_back();
  CHECK_FALSE(is_packed_share(shorter, n));
  auto longer = packed[0];
  longer.push_back(0.0f);
  CHECK_FALSE(is_packed_share(longer, n));
  if (n % 2 == 1) {
    auto padded = packed[0];
    std::as_writable_bytes(std::span<float>(padded)).back() = std::byte{1};
    CHECK_FALSE(is_packed_share(padded, n));
  }
}

TEST_CASE("a masked share is independent of its sender's values; an unmasked one is not", "[privacy][unit]") {
  // The receiver b knows its own pair secret with a and removes that mask; what is left is a's values
  // under a's mask with c. Over many rounds the sender's secret bit (values ±0.5) and the lane b sees
  // must be independent. The same check on the unmasked encoding must find the dependence, so that it
  // can fail.
  const std::vector<std::string> names = {"a", "b", "c"};
  std::map<std::string, peer::CurveKeyPair> all;
  for (const auto& n : names) all[n] = peer::generate_curve_key_pair();
  auto a = keys_for(all, "a"), b = keys_for(all, "b");
  const std::size_t lanes_per_round = 256, rounds = 200;
  std::mt19937 rng(11);
  std::vector<int> bits;
  std::vector<std::uint64_t> seen_masked, seen_plain;
  for (std::uint64_t step = 0; step < rounds; ++step) {
    std::vector<float> values(lanes_per_round);
    for (auto& v : values) {
      bits.push_back(static_cast<int>(rng() & 1));
      v = bits.back() ? 0.5f : -0.5f;
    }
    const MaskRound round{3, step, 0, 0};
    std::vector<std::uint64_t> share(lanes_per_round), plain(lanes_per_round);
    encode(values, plain);
    share = plain;
    mask_share("a", names, *a, round, share);
    // b removes the one mask it can: a adds the (a, b) stream, so b subtracts it.
    add_pair_mask(b->with("a"), round, /*subtract=*/true, share);
    seen_masked.insert(seen_masked.end(), share.begin(), share.end());
    seen_plain.insert(seen_plain.end(), plain.begin(), plain.end());
  }
  const double masked = chi_square_bit_vs_lane(bits, seen_masked);
  const double plain = chi_square_bit_vs_lane(bits, seen_plain);
  INFO("chi-square, 15 degrees of freedom: masked " << masked << ", unmasked " << plain);
  CHECK(masked < kChiSquareDependent);
  CHECK(plain > kChiSquareDependent);
}

TEST_CASE("over real ZeroMQ sites the masked mean equals the unmasked fixed-point mean bit for bit",
          "[privacy][zmq][cluster]") {
  const std::size_t sites = GENERATE(as<std::size_t>{}, 4, 7);
  INFO(sites << " sites");
  CurveFederation fed(testing::site_names(sites));
  const peer::View view = fed.agreed_view(fed.names);
  const std::uint64_t step = view.effective_round;
  // Each share's 6 · n bytes take two chunks of the transport's 1 MiB, and its words form every float
  // pattern, NaN and infinity included, which the transport passes through unread.
  const std::size_t n = 200'003;
  std::vector<std::vector<float>> data;
  for (std::size_t r = 0; r < sites; ++r) data.push_back(random_values(n, 100 + r, 0.3f));
  data[1][5] = 1e5f;  // clipped
  data[2][6] = std::numeric_limits<float>::quiet_NaN();
  const auto originals = data;  // the mixes overwrite `data` with the mean
  std::vector<std::span<const float>> inputs(originals.begin(), originals.end());
  std::vector<float> expected(n);
  plain_fixed_point_mean(inputs, expected);
  std::vector<SecureAggregationCounters> counters(sites);
  std::vector<gossip::MixReport> reports(sites);
  fed.run(
      [&] {
        std::vector<std::size_t> all(sites);
        for (std::size_t r = 0; r < sites; ++r) all[r] = r;
        return all;
      }(),
      [&](std::size_t r, peer::ZmqTransport& t) {
        gossip::Inbox inbox(t);
        auto keys = fed.pair_keys(fed.names[r]);
        SecureMeanMixer mixer(inbox, *keys, counters[r], {}, SecureMeanMixer::whole_view(), 0,
                              SecureMeanMixer::Abandon::kRedo);
        double w = 1.0;
        reports[r] = mixer.mix(step, gossip::RoundTag::kMix, data[r], w);
      });
  for (std::size_t r = 0; r < sites; ++r) {
    INFO("site " << r);
    CHECK(reports[r].view_id == view.id);
    CHECK(reports[r].abandoned == 0);
    CHECK(std::memcmp(data[r].data(), expected.data(), n * sizeof(float)) == 0);
    CHECK(counters[r].shares_sent.load() == sites - 1);
    CHECK(counters[r].refused_malformed.load() + counters[r].refused_stale.load() +
              counters[r].refused_unmasked.load() ==
          0);
  }
  CHECK(counters[1].clipped.load() == 1);
  CHECK(counters[2].non_finite.load() == 1);
  // And close to the float mean: each value is encoded to within 2^-25.
  for (std::size_t i = 0; i < n; i += 101) {
    if (i == 5 || i == 6) continue;
    double mean = 0;
    for (const auto& input : inputs) mean += input[i];
    CHECK(std::abs(expected[i] - mean / static_cast<double>(sites)) <= 1e-6);
  }
}

TEST_CASE("over ZeroMQ a crashed site's secure round is redone in the next view with fresh masks",
          "[privacy][zmq][faults][cluster]") {
  CurveFederation fed(testing::site_names(4));
  const peer::View view = fed.agreed_view(fed.names);
  fed.sites[3].reset();  // site3 crashes: no leave; the others notice by missed heartbeats
  gossip::RoundTimeouts timeouts;
  timeouts.round = 300ms;
  const std::size_t n = 1000;
  std::vector<std::vector<float>> data;
  for (std::size_t r = 0; r < 3; ++r) data.push_back(random_values(n, 200 + r, 1.0f));
  std::vector<std::span<const float>> inputs(data.begin(), data.end());
  std::vector<float> expected(n);
  plain_fixed_point_mean(inputs, expected);
  std::vector<SecureAggregationCounters> counters(3);
  std::vector<gossip::MixReport> reports(3);
  fed.run({0, 1, 2}, [&](std::size_t r, peer::ZmqTransport& t) {
    gossip::Inbox inbox(t);
    auto keys = fed.pair_keys(fed.names[r]);
    SecureMeanMixer mixer(inbox, *keys, counters[r], timeouts, SecureMeanMixer::whole_view(), 0,
                          SecureMeanMixer::Abandon::kRedo);
    double w = 1.0;
    reports[r] = mixer.mix(view.effective_round, gossip::RoundTag::kMix, data[r], w);
  });
  for (std::size_t r = 0; r < 3; ++r) {
    INFO("site " << r);
    CHECK(reports[r].abandoned >= 1);
    CHECK(reports[r].view_id > view.id);
    CHECK(std::memcmp(data[r].data(), expected.data(), n * sizeof(float)) == 0);
    CHECK(counters[r].refused_unmasked.load() == 0);
  }
}

TEST_CASE("under --round-timeout auto a secure round runs to the measured deadline, not the fixed one",
          "[privacy][zmq][deadlines][cluster]") {
  // With a measured deadline the fixed one is unused (gossip/mixer.h). Here it is 0, which abandons a
  // round at its first wait for a share (and, with no newer view, leaves each site its own values);
  // the measured deadline, 30 s until mixes are measured as under the daemon's auto, lets the round
  // complete with the exact mean everywhere.
  const std::size_t sites = 3;
  CurveFederation fed(testing::site_names(sites));
  const peer::View view = fed.agreed_view(fed.names);
  gossip::RoundTimeouts timeouts;
  timeouts.round = 0ms;
  timeouts.view_change = 100ms;
  peer::AdaptiveDeadlineRule rule;
  rule.floor = std::chrono::seconds(10);
  rule.cap = std::chrono::hours(1);
  rule.initial = std::chrono::seconds(30);
  timeouts.adaptive = std::make_shared<peer::AdaptiveDeadline>(rule);
  const std::size_t n = 10'000;
  std::vector<std::vector<float>> data;
  for (std::size_t r = 0; r < sites; ++r) data.push_back(random_values(n, 300 + r, 1.0f));
  const auto originals = data;
  std::vector<std::span<const float>> inputs(originals.begin(), originals.end());
  std::vector<float> expected(n);
  plain_fixed_point_mean(inputs, expected);
  std::vector<SecureAggregationCounters> counters(sites);
  std::vector<gossip::MixReport> reports(sites);
  fed.run({0, 1, 2}, [&](std::size_t r, peer::ZmqTransport& t) {
    gossip::Inbox inbox(t);
    auto keys = fed.pair_keys(fed.names[r]);
    SecureMeanMixer mixer(inbox, *keys, counters[r], timeouts, SecureMeanMixer::whole_view(), 0,
                          SecureMeanMixer::Abandon::kRedo);
    double w = 1.0;
    reports[r] = mixer.mix(view.effective_round, gossip::RoundTag::kMix, data[r], w);
  });
  for (std::size_t r = 0; r < sites; ++r) {
    INFO("site " << r);
    CHECK(reports[r].abandoned == 0);
    CHECK(reports[r].view_id == view.id);
    CHECK(std::memcmp(data[r].data(), expected.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("malformed, stale and replayed masked shares are refused and counted, and the round completes",
          "[privacy][zmq][hostile][cluster]") {
  CurveFederation fed(testing::site_names(3));
  const peer::View view = fed.agreed_view(fed.names);
  const std::uint64_t step = view.effective_round + 1;
  const std::size_t n = 513;  // odd: two bytes of padding
  std::vector<std::vector<float>> data;
  for (std::size_t r = 0; r < 3; ++r) data.push_back(random_values(n, 300 + r, 1.0f));
  std::vector<std::span<const float>> inputs(data.begin(), data.end());
  std::vector<float> expected(n);
  plain_fixed_point_mean(inputs, expected);

  // site2 turns hostile towards site0: before its genuine share it sends a truncated one (one word
  // short) and one whose padding is not zero, both refused by the transport before they count as
  // received, its share of another round, and after it a replay of its genuine share.
  peer::ZmqTransport& hostile = *fed.sites[2];
  auto hostile_keys = fed.pair_keys("site2");
  auto share_of = [&](std::uint64_t round_step, std::uint64_t view_id) {
    std::vector<std::uint64_t> lanes(n), masked(n);
    encode(data[2], lanes);
    peer::Message m;
    m.kind = peer::MessageKind::kCompressedShare;
    m.view_id = view_id;
    m.round = round_step;
    m.phase = peer::kOpaquePayloadPhase;
    m.total = n;
    m.payload.resize(packed_words(n));
    const std::vector<std::span<float>> outs = {m.payload};
    mask_and_pack("site2", fed.names, *hostile_keys, MaskRound{view_id, round_step, 0, 0}, lanes, masked, outs);
    return m;
  };
  gossip::Inbox victim_inbox(*fed.sites[0]);
  {
    auto truncated = share_of(step, view.id);
    truncated.payload.pop_back();
    hostile.send("site0", std::move(truncated));
    auto padded = share_of(step, view.id);
    std::as_writable_bytes(std::span<float>(padded.payload)).back() = std::byte{0x80};
    hostile.send("site0", std::move(padded));
    hostile.send("site0", share_of(step - 1, view.id));  // taken from another round
  }
  REQUIRE(tests::eventually([&] {
    victim_inbox.pump(5ms);
    return victim_inbox.stashed() >= 1;  // the share of another round; the two before it were refused
  }));
  for (const auto& to : {"site0", "site1"}) hostile.send(to, share_of(step, view.id));
  hostile.send("site0", share_of(step, view.id));  // the replay

  std::vector<SecureAggregationCounters> counters(2);
  fed.run({0, 1}, [&](std::size_t r, peer::ZmqTransport& t) {
    std::optional<gossip::Inbox> own;
    gossip::Inbox& inbox = r == 0 ? victim_inbox : own.emplace(t);
    auto keys = fed.pair_keys(fed.names[r]);
    SecureMeanMixer mixer(inbox, *keys, counters[r], {}, SecureMeanMixer::whole_view(), 0,
                          SecureMeanMixer::Abandon::kRedo);
    double w = 1.0;
    const auto report = mixer.mix(step, gossip::RoundTag::kMix, data[r], w);
    CHECK(report.abandoned == 0);
  });
  for (std::size_t r = 0; r < 2; ++r) CHECK(std::memcmp(data[r].data(), expected.data(), n * sizeof(float)) == 0);
  CHECK(counters[0].refused_stale.load() == 1);
  CHECK(counters[0].refused_malformed.load() + counters[1].refused_malformed.load() + counters[1].refused_stale.load() ==
        0);
  const auto& refused = fed.sites[0]->rejections();
  CHECK(refused.count(peer::RejectCause::kTensorLength) == 1);
  CHECK(refused.count(peer::RejectCause::kMalformed) == 1);
  CHECK(tests::eventually([&] { return refused.count(peer::RejectCause::kReplayed) == 1; }));
}

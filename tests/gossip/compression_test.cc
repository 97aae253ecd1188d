#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>

#include "gossip/direct_mean_mixer.h"
#include "gossip/dts.h"
#include "gossip/error_feedback.h"
#include "gossip/push_sum.h"
#include "gossip/synchronous_average.h"
#include "gossip/tensor_codec.h"
#include "allreduce_reference.h"
#include "error/error.h"
#include "site_cluster.h"

using namespace meridian::gossip;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;
using namespace std::chrono_literals;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

}  // namespace

TEST_CASE("compression specs parse and print back", "[gossip][compression][unit]") {
  CHECK(parse_compression("none") == CompressionSpec{});
  CHECK(parse_compression("fp16")->encoding == Encoding::kFp16);
  CHECK(parse_compression("topk")->fraction == 0.01);
  CHECK(parse_compression("topk:0.05")->fraction == 0.05);
  for (const char* bad : {"fp32", "topk:", "topk:0", "topk:0.6", "topk:x", "topk:0.1x", "top-k"})
    CHECK_FALSE(parse_compression(bad));
  for (const char* text : {"none", "fp16", "topk:0.01", "topk:0.25"})
    CHECK(to_string(*parse_compression(text)) == text);
}

TEST_CASE("fp16: every half survives the round trip and rounding is to nearest even", "[gossip][compression][unit]") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf and NaN are never produced
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    REQUIRE(float_to_half(f) == h);
  }
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(1e9f) == 0x7bff);  // saturates instead of inf
  CHECK(float_to_half(-INFINITY) == 0xfbff);
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -26)) == 0x0000);  // below half of it: flushed
  // Halfway between 1 and the next half (1 + 2^-10) goes to the even one, 1; just above goes up.
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(float_to_half(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3c01);
}

TEST_CASE("fp16 round trip error is within half a half-ulp", "[gossip][compression][unit]") {
  std::vector<float> values;
  for (float scale : {1e-6f, 1e-3f, 1.0f, 1e3f}) {
    auto v = random_values(5000, 7, scale);
    values.insert(values.end(), v.begin(), v.end());
  }
  for (float x : values) {
    const float back = half_to_float(float_to_half(x));
    const float ax = std::fabs(x);
    if (ax >= std::ldexp(1.0f, -14)) {
      CHECK(std::fabs(back - x) <= std::ldexp(ax, -11));
    } else {
      CHECK(std::fabs(back - x) <= std::ldexp(1.0f, -25));
    }
  }
}

TEST_CASE("fp16 packing: finite words, decode gives what encode promised", "[gossip][compression][unit]") {
  TensorCodec codec(*parse_compression("fp16"));
  for (std::size_t n : {0u, 1u, 2u, 7u, 1000u}) {
    auto values = random_values(n, 3, 100.0f);
    if (n >= 2) {
      values[0] = 65504.0f;  // the largest exponents in the high half
      values[1] = -1e30f;
    }
    std::vector<float> packed, decoded(n), out(n);
    codec.encode(values, packed, decoded);
    CHECK(packed.size() == (n + 1) / 2);
    for (float w : packed) CHECK(std::isfinite(w));
    REQUIRE(decode(Encoding::kFp16, packed, out));
    // Bit for bit; not memcmp, which must not be given an empty vector's (possibly null) data().
    CHECK(std::ranges::equal(out, decoded, [](float a, float b) {
      return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
    }));
    std::vector<float> wrong(n + 2);
    CHECK_FALSE(decode(Encoding::kFp16, packed, wrong));
  }
  // A word whose high half is a half infinity is refused.
  std::vector<float> bad{std::bit_cast<float>(0x7c000000u)}, out(2);
  CHECK_FALSE(decode(Encoding::kFp16, bad, out));
}

TEST_CASE("top-k keeps the k largest magnitudes with their indices", "[gossip][compression][unit]") {
  TensorCodec codec(*parse_compression("topk:0.1"));
  std::vector<float> values(50);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>((i * 37) % 50) * (i % 2 ? -1.0f : 1.0f);
  std::vector<float> packed, decoded(values.size()), out(values.size());
  codec.encode(values, packed, decoded);
  REQUIRE(packed.size() == 10);  // k = 5 values, 5 indices
  for (std::size_t i = 0; i < values.size(); ++i) {
    const bool kept = std::fabs(values[i]) >= 45.0f;
    CHECK(decoded[i] == (kept ? values[i] : 0.0f));
  }
  REQUIRE(decode(Encoding::kTopK, packed, out));
  CHECK(out == decoded);

  SECTION("malformed payloads are refused") {
    auto p = packed;
    p[5] = 50.0f;  // index out of range
    CHECK_FALSE(decode(Encoding::kTopK, p, out));
    p = packed;
    std::swap(p[5], p[6]);  // not ascending
    CHECK_FALSE(decode(Encoding::kTopK, p, out));
    p = packed;
    p[7] += 0.5f;  // not an index
    CHECK_FALSE(decode(Encoding::kTopK, p, out));
    p = packed;
    p[0] = NAN;
    CHECK_FALSE(decode(Encoding::kTopK, p, out));
    p.pop_back();  // odd length
    CHECK_FALSE(decode(Encoding::kTopK, p, out));
  }
}

TEST_CASE("error feedback: sent + residual equals input + previous residual exactly", "[gossip][compression][unit]") {
  for (const char* text : {"fp16", "topk:0.05"}) {
    ErrorFeedback feedback(*parse_compression(text));
    const std::size_t n = 400;
    std::vector<float> packed, sent(n), total_in(n, 0.0f), total_sent(n, 0.0f);
    std::vector<double> in_sum(n, 0.0), sent_sum(n, 0.0);
    for (std::uint32_t step = 0; step < 60; ++step) {
      // Gradient-like values spanning magnitudes, some below fp16's range.
      auto input = random_values(n, step, step % 3 == 0 ? 1e-6f : 0.1f);
      std::vector<float> before(feedback.residual().begin(), feedback.residual().end());
      if (before.empty()) before.assign(n, 0.0f);
      feedback.compress(input, packed, sent);
      for (std::size_t i = 0; i < n; ++i) {
        INFO(text << " step " << step << " element " << i);
        REQUIRE(sent[i] + feedback.residual()[i] == input[i] + before[i]);
        in_sum[i] += input[i];
        sent_sum[i] += sent[i];
      }
    }
    // Nothing is lost: what was not sent yet is the residual (up to the float sums above).
    for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(in_sum[i] - sent_sum[i] - feedback.residual()[i]) < 1e-5);
  }
}

TEST_CASE("compressed mean: every site gets the same bits, the mean of what was sent",
          "[gossip][compression][cluster]") {
  for (const char* text : {"fp16", "topk:0.1"}) {
    const std::size_t sites = 4, n = 300, steps = 5;
    SiteCluster cluster(sites, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, *parse_compression(text));
    std::vector<std::vector<std::vector<float>>> results(sites);
    cluster.run([&](std::size_t r, MixChannel& channel) {
      for (std::uint64_t k = 0; k < steps; ++k) {
        auto data = random_values(n, static_cast<std::uint32_t>(100 * r + k), 1.0f);
        average_now(channel, k, data, 10s, RoundTag::kMix);
        results[r].push_back(data);
      }
      // The re-average tag stays exact (the ring).
      std::vector<float> ones(n, static_cast<float>(r));
      average_now(channel, steps, ones, 10s, RoundTag::kReaverage);
      results[r].push_back(ones);
    });
    INFO(text);
    for (std::size_t r = 1; r < sites; ++r)
      for (std::size_t k = 0; k <= steps; ++k)
        CHECK(std::memcmp(results[r][k].data(), results[0][k].data(), n * sizeof(float)) == 0);
    CHECK(results[0][steps][0] == 1.5f);
    // Over all steps, Σ means = Σ exact means − mean of the residuals left over.
    std::vector<double> exact(n, 0.0), got(n, 0.0);
    for (std::size_t r = 0; r < sites; ++r)
      for (std::uint64_t k = 0; k < steps; ++k) {
        auto data = random_values(n, static_cast<std::uint32_t>(100 * r + k), 1.0f);
        for (std::size_t i = 0; i < n; ++i) exact[i] += data[i] / sites;
      }
    for (std::uint64_t k = 0; k < steps; ++k)
      for (std::size_t i = 0; i < n; ++i) got[i] += results[0][k][i];
    for (std::size_t r = 0; r < sites; ++r) {
      auto& mixer = static_cast<DirectMeanMixer&>(*cluster.site(r).algorithm);
      for (std::size_t i = 0; i < n; ++i) got[i] += mixer.residual()[i] / sites;
    }
    for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(got[i] - exact[i]) < 1e-4);
  }
}

TEST_CASE("direct exchange, dense: mixes and re-averages give every site the same bits, the exact mean",
          "[gossip][compression][dts][cluster]") {
  const std::size_t sites = 4, n = 300, steps = 4;
  SiteCluster cluster(sites, MixerKind::kDirectMean);
  std::vector<std::vector<std::vector<float>>> results(sites);
  cluster.run([&](std::size_t r, MixChannel& channel) {
    for (std::uint64_t k = 0; k < steps; ++k) {
      auto data = random_values(n, static_cast<std::uint32_t>(100 * r + k), 1.0f);
      average_now(channel, k, data, 10s, k % 2 == 0 ? RoundTag::kMix : RoundTag::kReaverage);
      results[r].push_back(data);
    }
  });
  for (std::size_t r = 1; r < sites; ++r)
    for (std::size_t k = 0; k < steps; ++k)
      CHECK(std::memcmp(results[r][k].data(), results[0][k].data(), n * sizeof(float)) == 0);
  for (std::uint64_t k = 0; k < steps; ++k) {
    INFO("step " << k);
    for (std::size_t i = 0; i < n; ++i) {
      double mean = 0.0;
      for (std::size_t r = 0; r < sites; ++r)
        mean += random_values(n, static_cast<std::uint32_t>(100 * r + k), 1.0f)[i] / static_cast<double>(sites);
      CHECK(std::fabs(results[0][k][i] - mean) < 1e-6);
    }
  }
  // Nothing held back: the residual of a dense exchange stays zero.
  for (std::size_t r = 0; r < sites; ++r)
    for (float v : static_cast<DirectMeanMixer&>(*cluster.site(r).algorithm).residual()) CHECK(v == 0.0f);
}

namespace {
// The exact mixer a DirectMeanMixer must not fall back to: any round handed to it fails.
class RefusingMixer final : public Mixer {
 public:
  MixReport mix(std::uint64_t step, RoundTag, std::span<float>, double&) override {
    throw MixError("round " + std::to_string(step) + " went to the ring");
  }
};

// What each of three sites got from one mix at step 7: the error it threw ("" for none) and its data.
struct ThreeSiteMix {
  std::vector<std::string> errors;
  std::vector<std::vector<float>> results;
};

// Three sites on an in-memory network mix five copies of `first + r` (site r) once with `tag`, each
// through a DirectMeanMixer on `wire` with `max_sites` over a RefusingMixer ring.
ThreeSiteMix mix_on_three_sites(const char* wire, std::size_t max_sites, RoundTag tag, float first) {
  const auto names = testing::site_names(3);
  auto net = meridian::peer::InMemoryNetwork::create(names);
  ThreeSiteMix out{std::vector<std::string>(names.size()), std::vector<std::vector<float>>(names.size())};
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < names.size(); ++r)
    threads.emplace_back([&, r] {
      auto transport = net->endpoint(names[r]);
      Inbox inbox(*transport);
      RefusingMixer ring;
      DirectMeanMixer mixer(inbox, ring, *parse_compression(wire), {}, max_sites);
      std::vector<float> data(5, first + static_cast<float>(r));
      double weight = 1.0;
      try {
        mixer.mix(7, tag, data, weight);
      } catch (const MixError& e) {
        out.errors[r] = e.what();
      }
      out.results[r] = data;
    });
  for (auto& t : threads) t.join();
  return out;
}
}  // namespace

TEST_CASE("direct exchange: a re-average takes the single crossing with dense values, whatever the wire",
          "[gossip][compression][dts][cluster]") {
  for (const char* wire : {"none", "fp16"}) {
    INFO(wire);
    // Tenths, which fp16 cannot hold exactly: the mean shows whether the values travelled dense.
    const auto got = mix_on_three_sites(wire, std::numeric_limits<std::size_t>::max(), RoundTag::kReaverage, 0.1f);
    // (0.1 + 1.1 + 2.1) / 3 on every site, summed in rank order as the mixer does: an fp16 wire
    // re-averages in float32 too, with the same bits everywhere.
    const float mean = (0.1f + 1.1f + 2.1f) * (1.0f / 3.0f);
    for (std::size_t r = 0; r < got.results.size(); ++r) {
      CHECK(got.errors[r].empty());
      CHECK(got.results[r] == std::vector<float>(5, mean));
    }
  }
}

TEST_CASE("direct exchange with a site bound: a dense mean over a larger view takes the ring, a compressed one never",
          "[gossip][compression][cluster]") {
  struct Case {
    const char* wire;
    std::size_t max_sites;
    bool ring;
  };
  for (const Case c : {Case{"none", 2, true}, Case{"none", 3, false}, Case{"fp16", 2, false}}) {
    INFO(c.wire << ", at most " << c.max_sites << " sites direct");
    const auto got = mix_on_three_sites(c.wire, c.max_sites, RoundTag::kMix, 0.0f);
    for (std::size_t r = 0; r < got.results.size(); ++r) {
      if (c.ring) {
        CHECK(got.errors[r] == "round 7 went to the ring");
      } else {
        CHECK(got.errors[r].empty());
        for (float v : got.results[r]) CHECK(std::fabs(v - 1.0f) < 1e-3f);  // (0 + 1 + 2) / 3, fp16 rounding aside
      }
    }
  }
}

TEST_CASE("dts over compressed averages: allreduce's parameters plus the mean residual",
          "[gossip][compression][dts][cluster]") {
  const std::size_t sites = 4, dim = 64;
  const std::uint64_t steps = 30;
  const double lr = 0.1;
  auto gradient = [](std::uint64_t k, std::size_t j, std::size_t i) {
    return static_cast<float>(std::sin(0.7 * k + 1.3 * j + 0.37 * i) + 0.1 * j);
  };
  // Plain SGD: allreduce ends at w0 − γ·Σ ḡ; dts with error feedback at that plus the mean residual.
  std::vector<double> reference(dim, 1.0);
  for (std::uint64_t k = 0; k < steps; ++k)
    for (std::size_t i = 0; i < dim; ++i) {
      double g = 0;
      for (std::size_t j = 0; j < sites; ++j) g += gradient(k, j, i);
      reference[i] -= lr * g / sites;
    }
  for (const char* text : {"fp16", "topk:0.1"}) {
    SiteCluster cluster(sites, MixerKind::kDirectMean, {}, 1, {}, {}, 100.0, *parse_compression(text));
    std::vector<std::vector<float>> params(sites, std::vector<float>(dim, 1.0f));
    cluster.run([&](std::size_t r, MixChannel& channel) {
      std::vector<float> u, g(dim);
      DtsConfig config;
      config.delay = 2;
      config.period = 2;
      Dts dts(config, channel, params[r], u);
      for (std::uint64_t k = 0; k < steps; ++k) {
        for (std::size_t i = 0; i < dim; ++i) g[i] = gradient(k, r, i);
        dts.step(k, g, lr);
      }
      dts.finish();
    });
    INFO(text);
    // Equal up to rounding, as with uncompressed dts (each site applied its own W, then c̄ − W).
    for (std::size_t r = 1; r < sites; ++r)
      for (std::size_t i = 0; i < dim; ++i) CHECK(std::fabs(params[r][i] - params[0][i]) < 1e-5);
    double off = 0.0;
    for (std::size_t i = 0; i < dim; ++i) {
      double residual = 0.0;
      for (std::size_t r = 0; r < sites; ++r)
        residual += static_cast<DirectMeanMixer&>(*cluster.site(r).algorithm).residual()[i] / sites;
      CHECK(std::fabs(params[0][i] - (reference[i] + residual)) < 1e-4);
      off = std::max(off, std::fabs(params[0][i] - reference[i]));
    }
    // Top-k really left something behind (so the check above is not vacuous).
    if (std::string(text) != "fp16") CHECK(off > 1e-3);
  }
}

TEST_CASE("fp16 push-sum keeps the mass home and reaches consensus", "[gossip][compression][sgp][cluster]") {
  const std::size_t sites = 4, n = 200;
  SiteCluster cluster(sites, MixerKind::kPushSum, {}, 1, {}, {}, 100.0, *parse_compression("fp16"));
  std::vector<std::vector<float>> x(sites);
  std::vector<double> w(sites, 1.0);
  for (std::size_t r = 0; r < sites; ++r) x[r] = random_values(n, static_cast<std::uint32_t>(r), 1.0f);
  std::vector<double> mass(n, 0.0);
  for (std::size_t r = 0; r < sites; ++r)
    for (std::size_t i = 0; i < n; ++i) mass[i] += x[r][i];
  cluster.run([&](std::size_t r, MixChannel& channel) {
    for (std::uint64_t k = 0; k < 40; ++k) {
      MixJob job{k, RoundTag::kMix, channel.buffer(), w[r]};
      job.data.assign(x[r].begin(), x[r].end());
      channel.submit(std::move(job), 10s);
      auto result = channel.wait(k, RoundTag::kMix, 10s);
      x[r].assign(result.data.begin(), result.data.end());
      w[r] = result.weight;
      channel.recycle(std::move(result.data));
    }
  });
  double wsum = 0.0;
  for (double v : w) wsum += v;
  CHECK(wsum == Approx(sites).epsilon(1e-12));
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (std::size_t r = 0; r < sites; ++r) sum += x[r][i];
    CHECK(std::fabs(sum - mass[i]) < 1e-4);
    // Consensus on the mean: z = x/w at every site.
    for (std::size_t r = 0; r < sites; ++r) CHECK(std::fabs(x[r][i] / w[r] - mass[i] / sites) < 1e-3);
  }
}

TEST_CASE("push-sum refuses top-k compression", "[gossip][compression][sgp][cluster]") {
  CHECK_THROWS_AS(SiteCluster(2, MixerKind::kPushSum, {}, 1, {}, {}, 100.0, *parse_compression("topk:0.1")),
                  meridian::error::UserError);
}

TEST_CASE("dts with compensation off applies each average D steps late, and so ends where allreduce ends",
          "[gossip][dts][cluster]") {
  // With gradients that do not depend on the weights, the stale rule applies every average exactly
  // once, like allreduce, only later; a wrong rule (the vanilla one under momentum) would not.
  const std::size_t sites = 3, dim = 5;
  const std::uint64_t steps = 25;
  auto gradient = [](std::uint64_t k, std::size_t j, std::size_t i) {
    return static_cast<float>(std::cos(0.3 * k + j + 0.5 * i));
  };
  for (double m : {0.0, 0.9}) {
    const auto w_ref = testing::allreduce_momentum_reference(
        sites, dim, steps, m, [](std::uint64_t) { return 0.05; }, gradient);
    for (auto [d, p] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{{0, 1}, {3, 1}, {4, 2}}) {
      SiteCluster cluster(sites, MixerKind::kAverage);
      std::vector<std::vector<float>> params(sites, std::vector<float>(dim, 1.0f));
      cluster.run([&](std::size_t r, MixChannel& channel) {
        std::vector<float> u(dim, 0.0f), g(dim);
        DtsConfig config;
        config.delay = d;
        config.period = p;
        config.momentum = m;
        config.compensation = DtsCompensation::kStale;
        Dts dts(config, channel, params[r], u);
        for (std::uint64_t k = 0; k < steps; ++k) {
          for (std::size_t i = 0; i < dim; ++i) g[i] = gradient(k, r, i);
          dts.step(k, g, 0.05);
        }
        dts.finish();
      });
      INFO("m=" << m << " D=" << d << " P=" << p);
      for (std::size_t r = 0; r < sites; ++r)
        for (std::size_t i = 0; i < dim; ++i) CHECK(std::fabs(params[r][i] - w_ref[i]) < 2e-5);
    }
  }
  CHECK(parse_dts_compensation("off") == DtsCompensation::kStale);
  CHECK(parse_dts_compensation("no-momentum") == DtsCompensation::kVanillaRule);
  CHECK_FALSE(parse_dts_compensation("on"));
}

TEST_CASE("int8 packing: finite words, a power-of-two scale per block, within max|block|/126, stable when re-encoded",
          "[gossip][compression][unit]") {
  TensorCodec codec(CompressionSpec{Encoding::kInt8, 0.01});
  CHECK(to_string(codec.spec()) == "int8");
  CHECK(parse_compression("int8") == codec.spec());
  for (std::size_t n : {0u, 1u, 5u, 256u, 257u, 1000u}) {
    auto values = random_values(n, 4, 2.0f);
    if (n >= 300) {
      std::fill(values.begin() + 256, values.begin() + 300, 0.0f);  // a block's head of zeros
      values[3] = 1e-42f;                                           // subnormal
    }
    std::vector<float> packed, decoded(n), out(n);
    codec.encode(values, packed, decoded);
    CHECK(packed.size() == n / 256 * 65 + (n % 256 ? 1 + (n % 256 + 3) / 4 : 0));
    for (float w : packed) CHECK(std::isfinite(w));
    REQUIRE(decode(Encoding::kInt8, packed, out));
    CHECK(std::ranges::equal(out, decoded, [](float a, float b) {
      return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
    }));
    for (std::size_t begin = 0; begin < n; begin += kInt8Block) {
      const std::size_t end = std::min(n, begin + kInt8Block);
      float max = 0;
      for (std::size_t i = begin; i < end; ++i) max = std::max(max, std::abs(values[i]));
      for (std::size_t i = begin; i < end; ++i) {
        INFO("n " << n << ", element " << i);
        CHECK(std::abs(decoded[i] - values[i]) <= max / 126.0f);
        // x − q·s is exact: what error feedback keeps is exactly what was cut.
        CHECK(static_cast<double>(values[i]) - decoded[i] == static_cast<double>(values[i] - decoded[i]));
      }
    }
    std::vector<float> again_packed, again(n);
    codec.encode(decoded, again_packed, again);
    CHECK(std::ranges::equal(again, decoded, [](float a, float b) {
      return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
    }));
    std::vector<float> wrong(n + 5);
    CHECK_FALSE(decode(Encoding::kInt8, packed, wrong));
  }
  // NaN goes as 0, infinity saturates at a finite value.
  std::vector<float> odd{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f};
  std::vector<float> packed, decoded(3);
  codec.encode(odd, packed, decoded);
  CHECK(decoded[0] == 0.0f);
  CHECK(std::isfinite(decoded[1]));
  CHECK(decoded[1] > 1e38f);
  // Refused: a scale that is not a power of two, and a byte of magnitude 127.
  std::vector<float> out(4);
  std::vector<float> bad_scale{3.0f, std::bit_cast<float>(0x01020304u)};
  CHECK_FALSE(decode(Encoding::kInt8, bad_scale, out));
  std::vector<float> bad_byte{1.0f, std::bit_cast<float>(0x0102037fu)};
  CHECK_FALSE(decode(Encoding::kInt8, bad_byte, out));
  std::vector<float> good{1.0f, std::bit_cast<float>(0x0102037eu)};
  REQUIRE(decode(Encoding::kInt8, good, out));
  CHECK(out == std::vector<float>{1.0f, 2.0f, 3.0f, 126.0f});
}

// The GPU's background snapshot schedule (gossip/delayed_mixing.h, "Background snapshots";
// daemon/backend/backend_parameters.h with an AsyncParameterCopy), run on the CPU backend with a fake copy that
// reads the parameters only when it is guarded or waited for, as late as a device copy may: if the
// optimizer update ran before guard_writes(), the snapshot would hold the updated values and the run
// would differ from the synchronous one. So dsync over the background store must give the synchronous
// host store's bits at every step, and the fake's log shows the copy in flight across the next forward
// and backward pass and waited for only when it is handed over.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/backend/async_parameter_copy.h"
#include "daemon/backend/backend_parameters.h"
#include "error/error.h"
#include "gossip/delayed_mixing.h"
#include "gossip/parameter_store.h"
#include "models/backend_buffer.h"
#include "models/cpu_backend.h"
#include "tests/gossip/site_cluster.h"

using meridian::daemon::AsyncParameterCopy;
using meridian::daemon::BackendParameters;
using meridian::gossip::DelayedMixing;
using meridian::gossip::DelayedMixingConfig;
using meridian::gossip::MixChannel;
using meridian::gossip::testing::MixerKind;
using meridian::gossip::testing::SiteCluster;

namespace {

// Copies at the latest moment a device copy could: at guard_writes() or wait(), whichever comes first.
class LateCopy final : public AsyncParameterCopy {
 public:
  LateCopy(std::size_t count, std::vector<std::string>& log) : host_(count), log_(log) {}
  void start(const float* params, std::size_t count) override {
    if (source_ != nullptr) throw meridian::error::InternalError("fake copy started twice");
    log_.push_back("start");
    if (count != host_.size()) throw meridian::error::InternalError("fake copy: wrong count");
    source_ = params;
  }
  void guard_writes() override {
    log_.push_back("guard");
    copy_now();
  }
  std::span<const float> wait() override {
    log_.push_back("wait");
    copy_now();
    return host_;
  }

 private:
  void copy_now() {
    if (source_ == nullptr) return;
    std::copy(source_, source_ + host_.size(), host_.begin());
    source_ = nullptr;
  }
  std::vector<float> host_;
  const float* source_ = nullptr;
  std::vector<std::string>& log_;
};

float update_of(std::size_t k, std::size_t r, std::size_t i) {
  return static_cast<float>((k * 3 + r * 5 + i) % 8) / 16.0f;  // dyadic: every sum is exact
}

float start_of(std::size_t r, std::size_t i) { return static_cast<float>((r * 7 + i * 3) % 16) / 4.0f; }

using Params = std::vector<std::vector<std::vector<float>>>;  // [step][site][i]

constexpr std::size_t kSites = 2, kSteps = 9, kCount = 12;

// dsync as the daemon's Dsync runs it, with the parameters in host memory and synchronous snapshots.
Params run_host(DelayedMixingConfig config) {
  SiteCluster cluster(kSites, MixerKind::kAverage);
  Params out(kSteps, std::vector<std::vector<float>>(kSites));
  cluster.run([&](std::size_t r, MixChannel& channel) {
    std::vector<float> x(kCount);
    for (std::size_t i = 0; i < kCount; ++i) x[i] = start_of(r, i);
    DelayedMixing mixing(config, channel, x);
    for (std::size_t k = 0; k < kSteps; ++k) {
      mixing.before_update();
      for (std::size_t i = 0; i < kCount; ++i) x[i] -= update_of(k, r, i);
      mixing.after_step(k);
      out[k][r] = x;
    }
    mixing.finish();
  });
  return out;
}

// The same over backend memory with the background copy; logs[r] records the schedule of site r.
Params run_background(DelayedMixingConfig config, std::vector<std::vector<std::string>>& logs) {
  SiteCluster cluster(kSites, MixerKind::kAverage);
  Params out(kSteps, std::vector<std::vector<float>>(kSites));
  logs.assign(kSites, {});
  cluster.run([&](std::size_t r, MixChannel& channel) {
    meridian::models::CpuBackend backend(1);
    meridian::models::BackendBuffer<float> x(backend, kCount);
    for (std::size_t i = 0; i < kCount; ++i) x.data()[i] = start_of(r, i);
    BackendParameters store(backend, x.span(), std::make_unique<LateCopy>(kCount, logs[r]));
    DelayedMixing mixing(config, channel, store);
    for (std::size_t k = 0; k < kSteps; ++k) {
      logs[r].push_back("forward-backward");
      mixing.before_update();
      logs[r].push_back("update");
      for (std::size_t i = 0; i < kCount; ++i) x.data()[i] -= update_of(k, r, i);
      mixing.after_step(k);
      out[k][r].assign(x.data(), x.data() + kCount);
    }
    mixing.finish();
  });
  return out;
}

}  // namespace

TEST_CASE("dsync with background snapshots mixes the same values as with synchronous ones",
          "[daemon][mixing][snapshot][cluster]") {
  for (const std::uint32_t delay : {1u, 2u, 3u}) {
    DelayedMixingConfig config;
    config.delay = delay;
    config.mix_step = meridian::gossip::stable_mix_step(delay);
    config.reaverage_after_view_change = false;
    INFO("delay " << delay);
    std::vector<std::vector<std::string>> logs;
    const Params background = run_background(config, logs);
    const Params host = run_host(config);
    for (std::size_t k = 0; k < kSteps; ++k) {
      INFO("step " << k);
      CHECK(background[k] == host[k]);
    }
    // Step k's copy starts after its update and is guarded and waited for only after step k + 1's
    // forward and backward pass, right before step k + 1's update; finish() hands the last one over.
    std::vector<std::string> want;
    for (std::size_t k = 0; k < kSteps; ++k) {
      want.push_back("forward-backward");
      if (k > 0) {
        want.push_back("guard");
        want.push_back("wait");
      }
      want.push_back("update");
      want.push_back("start");
    }
    want.push_back("guard");
    want.push_back("wait");
    for (const auto& log : logs) CHECK(log == want);
  }
}

TEST_CASE("a background snapshot must be handed over before the next step", "[daemon][mixing][snapshot][unit]") {
  SiteCluster cluster(1, MixerKind::kAverage);
  std::vector<std::string> log;
  bool refused = false;
  cluster.run([&](std::size_t, MixChannel& channel) {
    meridian::models::CpuBackend backend(1);
    meridian::models::BackendBuffer<float> x(backend, kCount);
    BackendParameters store(backend, x.span(), std::make_unique<LateCopy>(kCount, log));
    DelayedMixingConfig config;
    config.delay = 1;
    DelayedMixing mixing(config, channel, store);
    mixing.after_step(0);
    try {
      mixing.after_step(1);  // the trainer forgot before_update()
    } catch (const meridian::error::InternalError&) {
      refused = true;
    }
    mixing.finish();
  });
  CHECK(refused);
}

TEST_CASE("with no delay the snapshot is read at once, not in the background", "[daemon][mixing][snapshot][unit]") {
  // D = 0 applies the mix of step k right after it, so there is nothing to overlap the copy with.
  SiteCluster cluster(1, MixerKind::kAverage);
  std::vector<std::string> log;
  std::vector<float> after;
  std::size_t in_flight = 1;
  cluster.run([&](std::size_t, MixChannel& channel) {
    meridian::models::CpuBackend backend(1);
    meridian::models::BackendBuffer<float> x(backend, kCount);
    for (std::size_t i = 0; i < kCount; ++i) x.data()[i] = start_of(0, i);
    BackendParameters store(backend, x.span(), std::make_unique<LateCopy>(kCount, log));
    DelayedMixing mixing(DelayedMixingConfig{}, channel, store);
    for (std::size_t k = 0; k < 3; ++k) {
      for (std::size_t i = 0; i < kCount; ++i) x.data()[i] -= update_of(k, 0, i);
      mixing.after_step(k);
    }
    in_flight = mixing.in_flight();
    after.assign(x.data(), x.data() + kCount);
  });
  CHECK(log.empty());
  CHECK(in_flight == 0);
  // One site: the mix is the identity, so the parameters are the starts minus the updates.
  for (std::size_t i = 0; i < kCount; ++i) {
    float want = start_of(0, i);
    for (std::size_t k = 0; k < 3; ++k) want -= update_of(k, 0, i);
    CHECK(after[i] == want);
  }
}

TEST_CASE("the CPU backend has no background copy, so the daemon's CPU path reads synchronously",
          "[daemon][mixing][snapshot][unit]") {
  meridian::models::CpuBackend backend(1);
  CHECK(meridian::daemon::make_async_parameter_copy(backend, 4) == nullptr);
  meridian::models::BackendBuffer<float> x(backend, 4);
  BackendParameters store(backend, x.span(), meridian::daemon::make_async_parameter_copy(backend, 4));
  CHECK_FALSE(store.background_read());
}

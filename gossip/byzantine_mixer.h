// Fault injection for robustness experiments: a Mixer that makes its site Byzantine. Every vector the
// site contributes to a mix is replaced by scaled garbage: scale·R·(d + ε), d a random ±1 direction
// fixed for the run, ε fresh standard normal noise, R the largest RMS of the site's honest vectors so
// far (RMS scale·√2·R); the site itself keeps training on its honest vector (the mix result is thrown
// away), so it stays alive and keeps sending garbage for the
// whole run. Used by the gossip tests and by `meridian start --byzantine-scale` (simulate's
// --byzantine), never in production.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "gossip/mixer.h"

namespace meridian::gossip {

// Thread-safety: none (communication thread only). Does not own `inner`.
class ByzantineMixer final : public Mixer {
 public:
  ByzantineMixer(Mixer& inner, double scale, std::uint64_t seed) : inner_(inner), scale_(scale), rng_(seed) {}

  // Runs `inner` on garbage in place of `data`, then restores `data` and `weight` (the result is dropped).
  MixReport mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) override;

 private:
  Mixer& inner_;
  double scale_;
  std::mt19937_64 rng_;
  std::vector<float> honest_;
  std::vector<float> direction_;
  double reference_rms_ = 0;
};

}  // namespace meridian::gossip

// A toy algorithm that exists only in the tests, with one option of its own (--toy-strength, a real
// number in (0, 1], default 0.5), to show what adding an algorithm takes: its own code, registered
// (algorithms::AlgorithmRegistration stands in for its line in daemon/algorithms/registry.cc), and
// nothing else. It is never run: its trainer side is not made.
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"

namespace meridian::tests {

inline constexpr daemon::algorithms::AlgorithmOption kToyStrength{
    .name = "toy-strength",
    .help = "toy: how hard the toy pulls, in (0, 1]",
    .brief = "toy: strength",
    .default_value = 0.5,
    .range = [](const daemon::algorithms::OptionValue& value) -> std::string {
      const double strength = std::get<double>(value);
      return strength > 0 && strength <= 1 ? "" : "must be in (0, 1] (e.g. 0.5)";
    },
};

class ToyAlgorithm final : public daemon::algorithms::Algorithm {
 public:
  std::string_view name() const override { return "toy"; }
  std::span<const daemon::algorithms::AlgorithmOption* const> options() const override { return options_; }
  void check(const daemon::SiteSettings&, std::vector<std::string>&) const override {}
  std::string describe_knobs(const daemon::SiteSettings& s) const override {
    char text[64];
    std::snprintf(text, sizeof text, "strength %g", s.options.algorithm_options.real(kToyStrength));
    return text;
  }
  bool communicates() const override { return false; }
  daemon::algorithms::WireLimits wire_limits(const daemon::SiteSettings&) const override { return {}; }
  daemon::algorithms::BufferSizes buffer_sizes(const daemon::SiteSettings&, std::size_t) const override { return {}; }
  std::unique_ptr<daemon::TrainerAlgorithm> make_trainer(const daemon::algorithms::TrainerContext&) const override {
    return nullptr;
  }

 private:
  std::array<const daemon::algorithms::AlgorithmOption*, 1> options_{&kToyStrength};
};

}  // namespace meridian::tests

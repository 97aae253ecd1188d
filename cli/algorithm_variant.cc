#include "cli/algorithm_variant.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace meridian::cli {
namespace {

const char* const kKnobs =
    "delay, period, out-peers, tau, grid, reaverage-every, compensation, compression, exchange, fragments, outer-lr, "
    "outer-momentum";

bool is_knob(const std::string& key) {
  for (const char* k : {"delay", "period", "out-peers", "tau", "grid", "reaverage-every", "compensation", "compression",
                        "exchange", "fragments", "outer-lr", "outer-momentum"})
    if (key == k) return true;
  return false;
}

template <typename T>
bool parse_number(const std::string& text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

AlgorithmVariantParse parse_algorithm_variant(const std::string& text) {
  AlgorithmVariantParse result;
  AlgorithmVariant& v = result.variant;
  v.label = text;
  std::size_t start = 0;
  auto colon = text.find(':');
  v.algo = text.substr(0, colon);
  while (colon != std::string::npos) {
    start = colon + 1;
    colon = text.find(':', start);
    const std::string part = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const auto equals = part.find('=');
    const std::string where = "--algo: '" + text + "': ";
    // compression=topk:0.01 carries a ':' of its own.
    if (equals == std::string::npos && !v.knobs.empty() && v.knobs.back().first == "compression" &&
        v.knobs.back().second == "topk") {
      v.knobs.back().second += ":" + part;
      continue;
    }
    if (equals == std::string::npos) {
      result.error = where + "'" + part + "' is not KNOB=VALUE (e.g. dts:delay=4:period=2)";
      return result;
    }
    std::string key = part.substr(0, equals), value = part.substr(equals + 1);
    if (!is_knob(key)) {
      result.error = where + "unknown knob '" + key + "' (knobs: " + kKnobs + ")";
      return result;
    }
    if (value.empty()) {
      result.error = where + "'" + key + "' has no value (e.g. " + key + "=4)";
      return result;
    }
    v.knobs.emplace_back(std::move(key), std::move(value));
  }
  return result;
}

void apply_algorithm_variant(const AlgorithmVariant& variant, daemon::SiteConfig& config, bool shared_delay_given,
                             bool shared_period_given, std::string& error) {
  config.algo = variant.algo;
  bool delay_given = shared_delay_given, period_given = shared_period_given;
  for (const auto& [key, value] : variant.knobs) {
    // Text knobs; site_config_problems judges their values.
    if (key == "grid") config.grid = value;
    else if (key == "compensation") config.compensation = value;
    else if (key == "compression") config.compression = value;
    else if (key == "exchange") config.exchange = value;
    if (key == "grid" || key == "compensation" || key == "compression" || key == "exchange") continue;
    // Real knobs (diloco's outer step).
    if (key == "outer-lr" || key == "outer-momentum") {
      double x = 0;
      if (!parse_number(value, x)) {
        error = "--algo: '" + variant.label + "': " + key + " '" + value + "' is not a number";
        return;
      }
      (key == "outer-lr" ? config.outer_lr : config.outer_momentum) = x;
      continue;
    }
    int n = 0;
    if (!parse_number(value, n)) {
      error = "--algo: '" + variant.label + "': " + key + " '" + value + "' is not a whole number";
      return;
    }
    if (key == "delay") {
      config.delay = n;
      delay_given = true;
    } else if (key == "period") {
      config.period = n;
      period_given = true;
    } else if (key == "out-peers") {
      config.out_peers = n;
    } else if (key == "tau") {
      config.tau = n;
    } else if (key == "reaverage-every") {
      config.reaverage_every = n;
    } else if (key == "fragments") {
      config.fragments = n;
    }
  }
  // The algorithm's defaults for the knobs given neither in this entry nor as simulate's own flags.
  daemon::apply_algorithm_defaults(config, [&](std::string_view option) {
    if (option == "delay") return delay_given;
    if (option == "period") return period_given;
    return std::any_of(variant.knobs.begin(), variant.knobs.end(),
                       [&](const auto& knob) { return knob.first == option; });
  });
}

}  // namespace meridian::cli

#include "cli/algorithm_variant.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>
#include <variant>

#include "daemon/algorithms/registry.h"

namespace meridian::cli {
namespace {

// The shared knobs an entry may carry, by name, with the field each sets. A text knob's value is judged
// by site_config_problems; a whole one must parse here. The options an algorithm declares for itself
// follow these (daemon/algorithms/registry.h).
struct SharedKnob {
  std::string_view name;
  std::variant<int daemon::SiteConfig::*, std::string daemon::SiteConfig::*> field;
};
using C = daemon::SiteConfig;
constexpr std::array<SharedKnob, 9> kSharedKnobs{{
    {"delay", &C::delay},
    {"period", &C::period},
    {"out-peers", &C::out_peers},
    {"tau", &C::tau},
    {"grid", &C::grid},
    {"reaverage-every", &C::reaverage_every},
    {"compensation", &C::compensation},
    {"compression", &C::compression},
    {"exchange", &C::exchange},
}};

const SharedKnob* find_shared_knob(std::string_view name) {
  const auto it = std::find_if(kSharedKnobs.begin(), kSharedKnobs.end(), [&](const auto& k) { return k.name == name; });
  return it == kSharedKnobs.end() ? nullptr : &*it;
}

bool is_knob(std::string_view key) {
  return find_shared_knob(key) != nullptr || daemon::algorithms::find_algorithm_option(key) != nullptr;
}

template <typename T>
bool parse_number(const std::string& text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string algorithm_variant_knobs() {
  std::string out;
  for (const auto& knob : kSharedKnobs) out += (out.empty() ? "" : ", ") + std::string(knob.name);
  for (const auto* option : daemon::algorithms::all_algorithm_options()) out += ", " + std::string(option->name);
  return out;
}

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
      result.error = where + "unknown knob '" + key + "' (knobs: " + algorithm_variant_knobs() + ")";
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

std::optional<std::string> apply_algorithm_variant(const AlgorithmVariant& variant, daemon::SiteConfig& config,
                                                   const std::function<bool(std::string_view option)>& shared_given) {
  config.algo = variant.algo;
  const auto not_a = [&](const std::string& key, const std::string& value, std::string_view type) {
    return "--algo: '" + variant.label + "': " + key + " '" + value + "' is not a " + std::string(type);
  };
  for (const auto& [key, value] : variant.knobs) {
    if (const auto* knob = find_shared_knob(key)) {
      if (const auto* text = std::get_if<std::string C::*>(&knob->field)) {
        config.*(*text) = value;
        continue;
      }
      int n = 0;
      if (key == "delay" || key == "tau") {
        // The shape knobs also take "auto" (daemon/algorithms/auto_shape.h).
        const auto shape = daemon::parse_shape_knob(value);
        if (!shape) return not_a(key, value, "whole number >= 0 or auto");
        n = *shape;
      } else if (!parse_number(value, n)) {
        return not_a(key, value, "whole number");
      }
      config.*std::get<int C::*>(knob->field) = n;
      continue;
    }
    // An option its algorithm declared (parse_algorithm_variant accepted no other key).
    const auto* option = daemon::algorithms::find_algorithm_option(key);
    const auto parsed = daemon::algorithms::parse_option_value(*option, value);
    if (!parsed) return not_a(key, value, daemon::algorithms::option_type_words(*option));
    config.algorithm_options.set(*option, *parsed);
  }
  // The algorithm's defaults for the knobs given neither in this entry nor as simulate's own flags.
  const auto in_entry = [&](std::string_view option) {
    return std::any_of(variant.knobs.begin(), variant.knobs.end(),
                       [&](const auto& knob) { return knob.first == option; });
  };
  daemon::apply_algorithm_defaults(
      config, [&](std::string_view option) { return in_entry(option) || (shared_given && shared_given(option)); });
  return std::nullopt;
}

}  // namespace meridian::cli

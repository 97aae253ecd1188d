// One entry of simulate's --algo list: an algorithm, optionally with its own knobs, so that one run can
// compare settings ("sgp,dts:delay=4:period=4,dts:delay=16"). Knobs given here win over the shared
// --delay/--period/... flags for this entry only. The whole text is the entry's label in the table,
// the CSV files, the plot and the directory OUT/<label>/.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/site_config.h"

namespace meridian::cli {

struct AlgorithmVariant {
  std::string label;                                       // the text as given, e.g. "dts:delay=4:period=4"
  std::string algo;                                        // the part before the first ':', e.g. "dts"
  std::vector<std::pair<std::string, std::string>> knobs;  // in order, e.g. {"delay","4"}, {"period","4"}
};

// The knobs an entry may carry, for help texts and messages: "delay, period, out-peers, tau, grid,
// reaverage-every, compensation, compression, exchange", then every option an algorithm declares for
// itself (daemon/algorithms/registry.h, all_algorithm_options).
std::string algorithm_variant_knobs();

// Splits "ALGO[:KNOB=VALUE]..." (no validation of the algorithm name: site_config_problems does that).
// Returns an error message naming the entry and the problem ("knob without '='", unknown knob, empty
// value), or the variant; the knobs are algorithm_variant_knobs() (e.g. dts:delay=8:period=4:compensation=off,
// dts:compression=topk:0.01).
struct AlgorithmVariantParse {
  AlgorithmVariant variant;
  std::string error;  // "" when the text is well formed
};
AlgorithmVariantParse parse_algorithm_variant(const std::string& text);

// `config` with the variant's algorithm and knobs applied (a declared option's value parsed to its type), then
// the algorithm's defaults for the knobs given neither here nor as simulate's own flags
// (daemon::apply_algorithm_defaults; dts: D = 2, P = 16 unless a delay or period was given). `shared_given` says
// whether simulate's flag --NAME was given, by NAME; empty: none was. Returns the problem when a value is not a
// number where one is needed (naming the entry, the knob and the value; `config` is then partly changed), nullopt
// otherwise.
[[nodiscard]] std::optional<std::string> apply_algorithm_variant(
    const AlgorithmVariant& variant, daemon::SiteConfig& config,
    const std::function<bool(std::string_view option)>& shared_given = {});

}  // namespace meridian::cli

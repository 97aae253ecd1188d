#include "daemon/algorithms/algorithm.h"

#include <algorithm>
#include <limits>

#include "error/error.h"
#include "gossip/direct_mean_mixer.h"
#include "gossip/push_sum_mixer.h"

namespace meridian::daemon::algorithms {

void Algorithm::apply_defaults(SiteConfig&, const OptionGiven&) const {}

bool Algorithm::reads(std::string_view) const { return false; }

bool Algorithm::declares(const AlgorithmOption& option) const {
  const auto declared = options();
  return std::find(declared.begin(), declared.end(), &option) != declared.end();
}

std::uint64_t Algorithm::view_change_reach(const SiteSettings& settings) const {
  const auto period = static_cast<std::uint64_t>(std::max(settings.options.period, 0));
  // An automatic overlap stays within the period (diloco's τ <= H).
  if (delay_is_auto(settings)) return 2 * period;
  return static_cast<std::uint64_t>(std::max(settings.options.delay, 0)) + period;
}

std::unique_ptr<AttachedTrainer> Algorithm::make_attached_trainer(const AttachedContext&) const {
  throw error::InternalError("--algo " + std::string(name()) + " has no attached trainer side");
}

MixerSet Algorithm::make_mixers(const MixerContext& context) const {
  MixerSet set;
  set.mix = &context.exact;
  return set;
}

bool delay_is_auto(const SiteSettings& settings) { return settings.options.delay == kAutoShape; }

std::size_t direct_exchange_max_sites(const SiteSettings& settings) {
  if (settings.exchange == Exchange::kDirect || settings.compression.encoding != gossip::Encoding::kDense)
    return std::numeric_limits<std::size_t>::max();
  return settings.exchange == Exchange::kAuto ? kAutoDirectMaxSites : 0;
}

std::string describe_exchange(const SiteSettings& settings) {
  const auto max_sites = direct_exchange_max_sites(settings);
  if (max_sites == 0) return "ring";
  if (max_sites == std::numeric_limits<std::size_t>::max()) return "direct";
  return "auto (direct up to " + std::to_string(max_sites) + " sites, ring above)";
}

MixerSet exact_mean_mixers(const MixerContext& context) {
  MixerSet set;
  const auto max_sites = direct_exchange_max_sites(context.settings);
  if (max_sites == 0 || context.pair_keys != nullptr) {
    set.mix = &context.exact;
    return set;
  }
  set.owned = std::make_unique<gossip::DirectMeanMixer>(context.inbox, context.exact, context.settings.compression,
                                                        context.timeouts, max_sites);
  set.mix = set.owned.get();
  set.reaverage_with_mix = true;
  return set;
}

MixerSet push_sum_mixers(const MixerContext& context, std::uint64_t staleness, std::uint64_t graph_period) {
  MixerSet set;
  set.owned = std::make_unique<gossip::PushSumMixer>(
      context.inbox, static_cast<std::size_t>(context.settings.options.out_peers), context.timeouts, context.robust,
      context.settings.compression, staleness, graph_period);
  set.mix = set.owned.get();
  return set;
}

}  // namespace meridian::daemon::algorithms

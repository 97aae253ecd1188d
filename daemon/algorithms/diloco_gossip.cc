#include "daemon/algorithms/diloco_gossip.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "daemon/algorithms/diloco.h"

namespace meridian::daemon::algorithms {
namespace {

class DilocoGossip final : public Algorithm {
 public:
  std::string_view name() const override { return "diloco-gossip"; }
  std::span<const AlgorithmOption* const> options() const override {
    static const std::array<const AlgorithmOption*, 4> options{&inner_steps_option(), &overlap_option(),
                                                               &outer_lr_option(), &outer_momentum_option()};
    return options;
  }
  // diloco's shape, for the same reasons (daemon/algorithms/diloco.h): one push-sum crossing is no longer
  // than diloco's direct exchange.
  // Unlike diloco's, its overlap is τ = 2 (at most H) unless given.
  void apply_defaults(SiteConfig& config, const OptionGiven& given) const override {
    const bool overlap_given = given(overlap_option().name) || (given("delay") && config.delay != SiteConfig{}.delay);
    adopt_renamed_shape_options(config, given);
    if (!overlap_given)
      config.algorithm_options.set(
          overlap_option(), std::min(kDilocoDefaultOverlap, config.algorithm_options.whole(inner_steps_option())));
  }
  bool reads(std::string_view option) const override { return option == "out-peers" || option == "compression"; }
  void check(const SiteSettings& s, std::vector<std::string>& problems) const override {
    if (!overlap_is_auto(s) && overlap_of(s) > inner_steps_of(s))
      problems.push_back("--overlap: diloco-gossip's overlap τ = " + std::to_string(overlap_of(s)) +
                         " exceeds --inner-steps H = " + std::to_string(inner_steps_of(s)) +
                         " (a share must land before the next outer step)");
  }
  // The push-sum mixer decodes fp16 shares only; int8's block scale would round the parameters
  // themselves (not a small pseudo-gradient, as in diloco) by up to 1/126 of the block's largest.
  bool accepts(gossip::Encoding encoding) const override {
    return encoding == gossip::Encoding::kDense || encoding == gossip::Encoding::kFp16;
  }
  std::string describe_knobs(const SiteSettings& s) const override {
    const auto& o = s.options;
    char outer[64];
    std::snprintf(outer, sizeof outer, "outer lr %g, outer momentum %g (Nesterov)",
                  o.algorithm_options.real(outer_lr_option()), o.algorithm_options.real(outer_momentum_option()));
    return "H = " + std::to_string(inner_steps_of(s)) + " inner steps (" + o.optimizer +
           "), overlap τ = " + (overlap_is_auto(s) ? "auto" : std::to_string(overlap_of(s))) + ", " + outer +
           ", push-sum outer average to K = " + std::to_string(o.out_peers) + " out-peer" +
           (o.out_peers == 1 ? "" : "s") + ", wire " + gossip::diloco_wire_name(s.compression);
  }
  // Staleness bound 0: the mix waits for its own step's shares, and the trainer's overlap τ keeps that
  // off the training path. One mix every H steps, each on the graph's next entry.
  MixerSet make_mixers(const MixerContext& c) const override {
    return push_sum_mixers(c, 0, static_cast<std::uint64_t>(inner_steps_of(c.settings)));
  }
  // A share is one model length of numerators (F = 1); nothing else travels.
  WireLimits wire_limits(const SiteSettings&) const override { return {}; }
  BufferSizes buffer_sizes(const SiteSettings&, std::size_t n) const override { return {n, n}; }
  std::uint64_t view_change_reach(const SiteSettings& s) const override { return diloco_view_change_reach(s); }
  // --overlap auto: the overlap follows the view's pace as diloco's does, with one crossing per share.
  bool shape_from_network(const SiteSettings& s) const override { return overlap_is_auto(s); }
  // Push-sum waits for nobody: a returning site joins at the round its peers mix.
  bool peers_wait_for_rejoin() const override { return false; }
  std::unique_ptr<TrainerAlgorithm> make_trainer(const TrainerContext& context) const override {
    return make_diloco_trainer(context, gossip_config_of(context.settings));
  }
  std::optional<TrainerHook> attached_hook() const override { return TrainerHook::kParameters; }
  std::unique_ptr<AttachedTrainer> make_attached_trainer(const AttachedContext& context) const override {
    return make_attached_diloco_trainer(context, gossip_config_of(context.settings));
  }

 private:
  static gossip::DilocoConfig gossip_config_of(const SiteSettings& settings) {
    gossip::DilocoConfig config = diloco_config_of(settings);
    config.outer_average = gossip::OuterAverage::kPushSum;
    config.wire = {};  // the mixer compresses the shares
    return config;
  }
};

}  // namespace

const Algorithm& diloco_gossip_algorithm() {
  static const DilocoGossip algorithm;
  return algorithm;
}

}  // namespace meridian::daemon::algorithms

// diloco: DiLoCo with Streaming DiLoCo's overlap and fragments (gossip::Diloco, gossip/diloco.h). The
// configured optimizer (--optimizer; AdamW in the paper) is the inner optimizer and runs every step;
// every H = --inner-steps steps a fragment's pseudo-gradient is averaged exactly over the view and an
// outer Nesterov step (--outer-lr, --outer-momentum) moves the global parameters. --overlap is τ:
// the exchange runs during τ further inner steps and is applied with delayed compensation; auto (the
// default) chooses τ from the network and follows the view's pace (daemon/algorithms/auto_shape.h).
// --fragments F staggers F fragment syncs H/F steps apart. --compression fp16 or int8 sends the
// pseudo-gradients compressed over the direct exchange; dense ones take it while the view has at most
// 8 sites and the ring above (--exchange auto, the default; ring or direct fix it). --inner-steps, --overlap,
// --fragments, --outer-lr and --outer-momentum are its own options, declared in diloco.cc
// (daemon/algorithms/algorithm_option.h); the others are shared. --period and --delay, the old spellings of
// --inner-steps and --overlap, are still read with a warning. Checkpoint sections: the parameters, the inner
// optimizer's state ("optimizer"), and the outer state "diloco-global" (θ_g) and "diloco-outer-momentum" (m), and with
// an fp16 or int8 wire "diloco-residuals" (the error-feedback residuals, element i's at i; optional: a checkpoint
// without it resumes with them at zero).
#pragma once

#include <memory>

#include "daemon/algorithms/algorithm.h"
#include "gossip/diloco.h"

namespace meridian::daemon::algorithms {

// diloco's shape when --inner-steps or --overlap is not given. H = 32 inner steps between outer syncs: 32
// times less traffic than allreduce; the paper's H = 500 is for models whose step takes seconds.
// Without --overlap τ is auto: chosen from the measured round trip and step time
// (daemon/algorithms/auto_shape.h), so that `--algo diloco` alone hides the latency it meets; until
// the network is measured it is kDilocoDefaultOverlap (at most H), which covers a crossing of a few
// steps' compute on a fast link.
inline constexpr int kDilocoDefaultInnerSteps = 32;
inline constexpr int kDilocoDefaultOverlap = 2;

const Algorithm& diloco_algorithm();

// What diloco-gossip (daemon/algorithms/diloco_gossip.h) shares with diloco: the shape's options
// --inner-steps and --overlap and the outer step's --outer-lr and --outer-momentum (declared once, read
// by both), the gossip::DilocoConfig of a site's settings, and the trainer side over any such config,
// with its checkpoint sections (and the push-sum weight).
const AlgorithmOption& inner_steps_option();
const AlgorithmOption& overlap_option();
const AlgorithmOption& outer_lr_option();
const AlgorithmOption& outer_momentum_option();
// H, τ (kAutoOptionValue for auto) and whether τ is auto, of settings that run either.
int inner_steps_of(const SiteSettings& settings);
int overlap_of(const SiteSettings& settings);
bool overlap_is_auto(const SiteSettings& settings);
// Algorithm::view_change_reach for both: τ + H, or 2H with an automatic τ (which stays within H).
std::uint64_t diloco_view_change_reach(const SiteSettings& settings);
// The old spellings, for one release (Algorithm::apply_defaults): a --period given other than its
// default becomes --inner-steps, and such a --delay --overlap, unless the new one is given too, each with
// a warning (warn_renamed_option); both return to their defaults, which these algorithms do not read.
void adopt_renamed_shape_options(SiteConfig& config, const OptionGiven& given);
gossip::DilocoConfig diloco_config_of(const SiteSettings& settings);
std::unique_ptr<TrainerAlgorithm> make_diloco_trainer(const TrainerContext& context,
                                                      const gossip::DilocoConfig& config);
// The same for an attached trainer (daemon/attached/attached_trainer.h): the trainer's optimizer is the inner
// one, and the parameters cross at the steps that sync or apply an exchange.
std::unique_ptr<AttachedTrainer> make_attached_diloco_trainer(const AttachedContext& context,
                                                              const gossip::DilocoConfig& config);

// The outer state's checkpoint sections ("diloco-global" θ_g, then "diloco-outer-momentum" m), written
// and read by every trainer that runs gossip::Diloco (the built-in one here, daemon/attached/attached_trainer.h),
// so that both keep the same sections. restore_outer_state throws CheckpointError naming a missing or
// mis-sized section.
std::vector<OptimizerSpan> outer_state_sections(const gossip::Diloco& diloco);
void restore_outer_state(const Checkpoint& checkpoint, gossip::Diloco& diloco);

}  // namespace meridian::daemon::algorithms

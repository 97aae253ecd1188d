#include "daemon/algorithms/algorithm.h"

namespace meridian::daemon::algorithms {

void Algorithm::apply_defaults(SiteConfig&, const OptionGiven&) const {}

bool Algorithm::reads(std::string_view) const { return false; }

MixerSet Algorithm::make_mixers(const MixerContext& context) const {
  MixerSet set;
  set.mix = &context.exact;
  return set;
}

}  // namespace meridian::daemon::algorithms

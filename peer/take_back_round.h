// Where the views take a returning site back. A site that restarts is left out of one view and taken
// back by the next (peer/membership.h): its peers redo the rounds its old incarnation was in without
// it, then wait for it at the first round of the view that takes it back. Later views may be announced
// on top of that one before the returning site hears of it (a new pace for the same members, say); it
// must still start at the take-back view's round, or its peers wait for it there in vain.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "peer/view.h"

namespace meridian::peer {

// The first round of the view that took `name` back: walking down from `latest` through the views in
// force before it (`view_for(round)`), the oldest of an unbroken run of views with `name` whose
// predecessor leaves it out. Only views after `since_round` count (the round the returning site's
// checkpoint was written at: a view that left it out before then, when the federation formed, say,
// is not a take-back). Nothing when `latest` leaves `name` out, when no such view lies after
// `since_round`, or when the history is not known that far back (view_for returns id 0 or a view not
// older than the one before it).
std::optional<std::uint64_t> take_back_round(const View& latest, const std::string& name, std::uint64_t since_round,
                                             const std::function<View(std::uint64_t)>& view_for);

}  // namespace meridian::peer

#include "peer/take_back_round.h"

namespace meridian::peer {

std::optional<std::uint64_t> take_back_round(const View& latest, const std::string& name, std::uint64_t since_round,
                                             const std::function<View(std::uint64_t)>& view_for) {
  if (!latest.rank_of(name) || latest.effective_round <= since_round) return std::nullopt;
  for (View v = latest; v.id > 0 && v.effective_round > since_round + 1;) {
    View older = view_for(v.effective_round - 1);
    if (older.id >= v.id || older.id == 0 || older.effective_round <= since_round) return std::nullopt;
    if (!older.rank_of(name)) return v.effective_round;
    v = std::move(older);
  }
  return std::nullopt;
}

}  // namespace meridian::peer

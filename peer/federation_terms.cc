#include "peer/federation_terms.h"

#include <algorithm>

namespace meridian::peer {

namespace {

constexpr const char* kNotAnnounced = "(not announced)";

const Term* find(const FederationTerms& terms, const std::string& name) {
  auto it = std::find_if(terms.begin(), terms.end(), [&](const Term& t) { return t.name == name; });
  return it == terms.end() ? nullptr : &*it;
}

}  // namespace

std::optional<TermsMismatch> compare_terms(const FederationTerms& ours, const FederationTerms& theirs) {
  for (const auto& term : ours) {
    const Term* other = find(theirs, term.name);
    if (!other) return TermsMismatch{term.name, term.value, kNotAnnounced, term.hint};
    if (other->value == term.value) continue;
    // Displays that agree (a detail they leave out differs) would hide the difference: then the values.
    if (!term.display.empty() && !other->display.empty() && term.display != other->display)
      return TermsMismatch{term.name, term.display, other->display, term.hint};
    return TermsMismatch{term.name, term.value, other->value, term.hint};
  }
  // A peer of a newer version may check more than we do; its extra field still makes the terms
  // differ, since that peer would refuse us for it anyway.
  for (const auto& term : theirs)
    if (!find(ours, term.name)) return TermsMismatch{term.name, kNotAnnounced, term.value};
  return std::nullopt;
}

std::string refusal_reason(const std::string& refuser, const TermsMismatch& m) {
  return refuser + " refuses this site: " + m.field + " differs (" + refuser + ": " + m.ours +
         "; this site: " + m.theirs + ")" + (m.hint.empty() ? "" : ": " + m.hint);
}

std::string refusal_log_detail(const std::string& refused, const TermsMismatch& m) {
  return "refused at join: " + m.field + " differs (this site: " + m.ours + "; " + refused + ": " + m.theirs + ")" +
         (m.hint.empty() ? "" : ": " + m.hint);
}

}  // namespace meridian::peer

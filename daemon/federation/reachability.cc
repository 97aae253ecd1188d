#include "daemon/federation/reachability.h"

#include <algorithm>
#include <utility>


namespace meridian::daemon {
namespace {

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// "a,b" into names; false when a name is not a valid site name or there are too many.
bool split(std::string_view text, std::vector<std::string>& out, std::size_t& count) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto name = text.substr(0, comma);
    if (!peer::is_valid_site_name(name) || ++count > kMaxReachNames) return false;
    out.emplace_back(name);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return false;  // a trailing comma
  }
  return true;
}

// One refusal between two sites, and who told this site of it.
struct Cause {
  std::string refuser, refused, reporter;
  bool roster = false;  // the refuser's roster lacks the refused site; otherwise it refused its key
};

}  // namespace

std::set<std::string> names_of(const peer::Roster& roster) {
  std::set<std::string> out;
  for (const auto& e : roster.entries()) out.insert(e.name);
  return out;
}

std::string encode_reach(const ReachReport& r) {
  return "reach members=" + joined(r.members) + " unlisted=" + joined(r.unlisted) + " refused_by=" +
         joined(r.refused_by);
}

std::optional<ReachReport> decode_reach(std::string_view body) {
  constexpr std::string_view kHead = "reach members=", kUnlisted = " unlisted=", kRefused = " refused_by=";
  if (!body.starts_with(kHead)) return std::nullopt;
  body.remove_prefix(kHead.size());
  const auto u = body.find(kUnlisted);
  if (u == std::string_view::npos) return std::nullopt;
  const auto r = body.find(kRefused, u);
  if (r == std::string_view::npos) return std::nullopt;
  ReachReport out;
  std::size_t count = 0;
  if (!split(body.substr(0, u), out.members, count) ||
      !split(body.substr(u + kUnlisted.size(), r - u - kUnlisted.size()), out.unlisted, count) ||
      !split(body.substr(r + kRefused.size()), out.refused_by, count))
    return std::nullopt;
  return out;
}

peer::Message reach_message(const ReachReport& report) {
  peer::Message m;
  m.kind = peer::MessageKind::kControl;
  m.tag = kReachTag;
  m.body = encode_reach(report);
  return m;
}

Reachability::Reachability(std::string self, std::optional<std::set<std::string>> roster)
    : self_(std::move(self)), roster_(std::move(roster)) {}

void Reachability::set_roster(std::optional<std::set<std::string>> roster) {
  std::lock_guard lock(mu_);
  roster_ = std::move(roster);
}

bool Reachability::note(const peer::Message& msg) {
  if (msg.kind != peer::MessageKind::kControl || msg.tag != kReachTag) return false;
  auto report = decode_reach(msg.body);
  if (!report) return false;
  std::lock_guard lock(mu_);
  reports_[msg.from] = std::move(*report);
  return true;
}

void Reachability::keep_only(const std::vector<std::string>& members) {
  std::lock_guard lock(mu_);
  std::erase_if(reports_, [&](const auto& entry) { return !has(members, entry.first); });
}

std::map<std::string, std::set<std::string>> Reachability::unlisted() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::set<std::string>> out;
  if (!roster_) return out;
  for (const auto& [peer, report] : reports_)
    for (const auto& name : report.members)
      if (name != self_ && !roster_->contains(name)) out[name].insert(peer);
  return out;
}

ReachReport Reachability::own_report(const std::vector<std::string>& alive,
                                     const std::vector<std::string>& refused_by) const {
  ReachReport r;
  r.members = alive;
  r.refused_by = refused_by;
  for (const auto& [name, holders] : unlisted()) r.unlisted.push_back(name);
  return r;
}

std::vector<std::string> Reachability::causes(const ReachReport& own) const {
  std::map<std::string, ReachReport> reports;
  std::optional<std::set<std::string>> roster;
  {
    std::lock_guard lock(mu_);
    reports = reports_;
    roster = roster_;
  }
  reports[self_] = own;
  std::set<std::string> alive;
  for (const auto& [site, report] : reports) alive.insert(report.members.begin(), report.members.end());
  // The causes of each pair that does not reach each other, keyed by the pair in name order.
  std::map<std::pair<std::string, std::string>, std::vector<Cause>> pairs;
  std::vector<std::pair<std::string, std::string>> unexplained;  // (this site, a member it does not reach)
  for (const auto& [a, report] : reports) {
    for (const auto& b : alive) {
      if (b == a || has(report.members, b)) continue;
      const auto key = std::minmax(a, b);
      auto& found = pairs[{key.first, key.second}];
      const auto add = [&](Cause c) {
        for (const auto& f : found)
          if (f.refuser == c.refuser && f.refused == c.refused && f.roster == c.roster) return;
        found.push_back(std::move(c));
      };
      const auto other = reports.find(b);
      if (has(report.unlisted, b)) add({a, b, a, true});
      if (other != reports.end() && has(other->second.refused_by, a)) add({a, b, b, false});
      if (has(report.refused_by, b)) add({b, a, a, false});
      if (other != reports.end() && has(other->second.unlisted, a)) add({b, a, b, true});
    }
  }
  const auto name = [&](const std::string& site) { return site == self_ ? std::string("this site") : site; };
  std::vector<std::string> out;
  for (const auto& [pair, found] : pairs) {
    if (found.empty()) {
      // Nobody has said why. Only this site's own side is worth a line: it does not reach a member
      // that others hold.
      const std::string& other = pair.first == self_ ? pair.second : pair.second == self_ ? pair.first : "";
      if (other.empty() || has(own.members, other)) continue;
      std::vector<std::string> holders;
      for (const auto& [site, report] : reports)
        if (site != self_ && has(report.members, other)) holders.push_back(site);
      if (holders.empty()) continue;
      std::string held;
      for (const auto& h : holders) held += (held.empty() ? "" : ", ") + h;
      std::string line = other + " is a member at " + held + " but has not reached this site; no cause is known here";
      if (roster && roster->contains(other))
        line += " (is the key this site's roster lists for " + other + " its current one? " + other +
                "'s log names the refusal)";
      out.push_back(std::move(line));
      continue;
    }
    const Cause& first = found.front();
    std::string line = first.refused == self_     ? "this site is not reachable from " + first.refuser
                       : first.refuser == self_   ? first.refused + " is not reachable from here"
                                                  : first.refused + " is not reachable from " + first.refuser;
    line += ": ";
    for (std::size_t i = 0; i < found.size(); ++i) {
      const Cause& c = found[i];
      if (i > 0) line += "; ";
      line += c.roster ? name(c.refuser) + "'s roster does not list " + name(c.refused)
                       : name(c.refuser) + " refused " + name(c.refused) + "'s key";
      if (c.reporter != self_) line += " (as " + c.reporter + " reports)";
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace meridian::daemon

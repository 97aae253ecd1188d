// Who reaches whom, as far as this site knows: why the sites that should form one view do not. Each
// site tells its live members, once a second, whom it holds as live members, which of the members its
// peers hold its own roster lacks, and which sites refused its key at the handshake (a
// peer::MessageKind::kControl message, tag kReachTag, body below). From these reports and its own
// knowledge a site names the causes in its waiting line and in `meridian status`, e.g.
// "riverside is not reachable from northclinic: northclinic's roster does not list riverside (as
// northclinic reports)". A report says only what its sender saw itself; nothing is relayed, so a
// cause is named only where the site that knows it can tell this one.
//
// Body: "reach members=a,b unlisted=c refused_by=d", each list comma-separated site names (possibly
// empty), at most kMaxReachNames names in all.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "peer/message.h"
#include "peer/roster.h"

namespace meridian::daemon {

inline constexpr std::uint32_t kReachTag = 0x72656163;  // "reac"
inline constexpr std::size_t kMaxReachNames = 1024;

struct ReachReport {
  std::vector<std::string> members;     // the live members the sender holds, itself included
  std::vector<std::string> unlisted;    // sites its peers hold as members that its own roster lacks
  std::vector<std::string> refused_by;  // sites that refused its key at the CURVE handshake
  friend bool operator==(const ReachReport&, const ReachReport&) = default;
};

std::string encode_reach(const ReachReport& report);
// nullopt for anything that is not a well-formed report of valid site names (never throws).
std::optional<ReachReport> decode_reach(std::string_view body);
peer::Message reach_message(const ReachReport& report);

// The names `roster` lists.
std::set<std::string> names_of(const peer::Roster& roster);

// This site's knowledge. Thread-safety: every method may be called from any thread (the control
// thread notes, the trainer's waiting line and `meridian status` read).
class Reachability {
 public:
  // `roster`: the names this site's roster lists; nullopt without a roster (--insecure: any name).
  Reachability(std::string self, std::optional<std::set<std::string>> roster);

  // The roster changed (`meridian roster`, SIGHUP).
  void set_roster(std::optional<std::set<std::string>> roster);
  // Records a peer's report in `msg` (kControl, kReachTag) from msg.from. Returns false, recording
  // nothing, for a message that is not a well-formed report.
  bool note(const peer::Message& msg);
  // Only the reports of `members` stay (a site that left says nothing any more).
  void keep_only(const std::vector<std::string>& members);

  // This site's report: its live members (`alive`, itself included), the sites that refused its key
  // (`refused_by`), and the members its peers hold that its roster lacks (unlisted()).
  ReachReport own_report(const std::vector<std::string>& alive, const std::vector<std::string>& refused_by) const;

  // Sites its peers hold as members that this site's roster lacks, each with the peers that hold it.
  std::map<std::string, std::set<std::string>> unlisted() const;

  // Why sites that some member holds are not reached, one line each, as far as this site knows from
  // its own report (see own_report) and its peers'. Empty when nothing is known to be wrong.
  std::vector<std::string> causes(const ReachReport& own) const;

 private:
  const std::string self_;
  mutable std::mutex mu_;
  std::optional<std::set<std::string>> roster_;
  std::map<std::string, ReachReport> reports_;  // newest per peer
};

}  // namespace meridian::daemon

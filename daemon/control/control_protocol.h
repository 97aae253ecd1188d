// What `meridian status`, `peers`, `leave` and `roster` ask a running daemon and what it answers, as
// plain structs, and their JSON encoding on the control socket (one small JSON object per message):
//   request  {"version": 1, "command": "status" | "peers" | "leave" | "federation"}
//            {"version": 1, "command": "roster", "roster": {"action": "list" | "add" | "remove" | "reload",
//                                                            "name": ..., "public_key": ..., "address": ...}}
//   reply    {"ok": true, "status": {...}} | {"ok": true, "peers": [...]} | {"ok": true, "leave": {...}}
//            {"ok": true, "federation": [...]} | {"ok": true, "roster": {...}}
//            {"ok": false, "error": "..."}
// The JSON library stays inside control_protocol.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "error/error.h"

namespace meridian::daemon {

inline constexpr int kControlProtocolVersion = 1;

enum class ControlCommand { kStatus, kPeers, kLeave, kFederation, kRoster };
const char* to_string(ControlCommand command);

struct StatusReport {
  std::string site;
  std::string algorithm;
  std::string state;   // joining | training | leaving | stopped
  std::string listen;  // the address peers connect to
  // Rounds of the run done, counted from the run's first round as the federation counts them (a site
  // that joined a running federation shows the federation's round, not its own steps), and the epochs
  // of this site's data those rounds make (whole epochs, from the same count).
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  // The run's rounds once the sites agreed on them, its share done (0-100), and the time left at the
  // recent pace; none before (JSON: keys absent).
  std::optional<std::uint64_t> total_steps;
  std::optional<double> percent_done;
  std::optional<double> eta_seconds;
  // What stands in this site's way as far as it knows, one line each for people: what it waits for
  // and why, a member other sites admit that its own roster lacks. Empty when nothing.
  std::vector<std::string> notes;
  // The three measurements of the progress report are none until the first one (a few seconds into
  // training); in JSON their keys are absent then, and null stands for NaN (a diverged loss).
  std::optional<double> train_loss;
  std::optional<double> test_accuracy;  // fraction in [0, 1]; none before the first evaluation
  // DP-SGD (--dp-*): the ε spent so far at the run's δ, and the budget; none without DP (no JSON keys).
  std::optional<double> dp_epsilon_spent;
  std::optional<double> dp_epsilon_budget;
  int peers_alive = 0;                  // including this site
  int peers_known = 0;                  // including this site
  std::uint64_t view_id = 0;
  std::uint64_t staleness = 0;  // steps ahead of the oldest expected mixer message
  double push_sum_weight = 1;
  std::optional<double> samples_per_second;
  std::optional<double> bytes_per_second;  // sent + received, recent average
  std::optional<double> max_send_bytes_per_second;  // --max-send-rate; none without a cap
  double uptime_seconds = 0;
  std::string last_checkpoint;  // path; empty before the first
  std::optional<double> checkpoint_age_seconds;
  // A shape chosen from the network (--delay auto, --tau auto; daemon/algorithms/auto_shape.h): the
  // shape in force ("D = 3, P = 24"), the round this site switched to it, and the view's figures it
  // came from (none while not measured: the default shape). Empty shape, no keys in JSON: a fixed shape.
  std::string shape;
  std::optional<std::uint64_t> shape_since_round;
  std::optional<double> shape_round_trip_seconds;
  std::optional<double> shape_step_seconds;
  // The deadlines in force (daemon/federation/deadlines.h) in seconds, and where each comes from, for people:
  // "given" or "auto: from the last 64 mixes: median 0.41 s, MAD 0.05 s, longest 1.2 s". 0 and empty
  // (JSON: keys absent) from a daemon that does not report them.
  double round_timeout_seconds = 0;
  std::string round_timeout_basis;
  double heartbeat_timeout_seconds = 0;
  std::string heartbeat_timeout_basis;
  bool operator==(const StatusReport&) const = default;
};

struct PeerReport {
  std::string name;
  std::string address;
  std::string state;                         // alive | suspect | dead | left
  std::optional<int> rank;                   // in the current view; none when not a member
  std::optional<double> rtt_seconds;         // none before the first heartbeat reply
  std::optional<double> last_heard_seconds;  // seconds since anything arrived from it; none for this site
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  bool operator==(const PeerReport&) const = default;
};

struct LeaveReport {
  bool accepted = false;                         // false when already leaving
  std::string message;                           // for people
  std::optional<std::uint64_t> effective_round;  // the announced round the view changes at
  bool operator==(const LeaveReport&) const = default;
};

// One site of the federation as this site last heard of it (`meridian status --federation`, the
// status page): its own summary (daemon/federation/federation_view.h) and when it arrived.
struct SiteRow {
  std::string site;
  bool self = false;  // the site that answers
  std::string state;  // joining | training | leaving | stopped as the site said; dead | unheard as seen here
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::optional<double> train_loss;          // none before its first progress report
  std::optional<double> test_accuracy;       // fraction in [0, 1]; none before its first evaluation
  std::optional<double> samples_per_second;  // none before its first progress report
  double push_sum_weight = 1;
  std::uint64_t staleness = 0;
  std::optional<double> last_heard_seconds;  // since its summary arrived; 0 for this site; none: never
  bool operator==(const SiteRow&) const = default;
};

// `meridian roster ...`: what to do to a running site's roster (peer/roster.h).
struct RosterChange {
  enum class Action { kList, kAdd, kRemove, kReload } action = Action::kList;
  std::string name;        // add, remove
  std::string public_key;  // add
  std::string address;     // add; may be empty
  bool operator==(const RosterChange&) const = default;
};
const char* to_string(RosterChange::Action action);

struct RosterSite {
  std::string name;
  std::string public_key;
  std::string address;
  bool operator==(const RosterSite&) const = default;
};

struct RosterReport {
  std::string message;            // for people: what changed
  std::string file;               // the roster file the site reads and writes
  std::vector<RosterSite> sites;  // the roster in force afterwards
  bool operator==(const RosterReport&) const = default;
};

// A decoded request: the command and, for kRoster, what to change.
struct ControlRequest {
  ControlCommand command = ControlCommand::kStatus;
  RosterChange roster;
};

// A malformed request or reply; what() says what is wrong.
class ControlProtocolError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

std::string encode_request(ControlCommand command);
std::string encode_roster_request(const RosterChange& change);
// Throws ControlProtocolError for anything that is not a valid request of this version.
ControlRequest decode_control_request(std::string_view text);
// decode_control_request(text).command.
ControlCommand decode_request(std::string_view text);

std::string encode_status_reply(const StatusReport& report);
std::string encode_peers_reply(const std::vector<PeerReport>& peers);
std::string encode_leave_reply(const LeaveReport& report);
std::string encode_federation_reply(const std::vector<SiteRow>& rows);
std::string encode_roster_reply(const RosterReport& report);
std::string encode_error_reply(const std::string& error);

// Decode a reply to `command`. A daemon's {"ok": false} reply (it refused the request) throws
// error::UserError with its error text prefixed by "the daemon says: "; anything malformed throws
// ControlProtocolError.
StatusReport decode_status_reply(std::string_view text);
std::vector<PeerReport> decode_peers_reply(std::string_view text);
LeaveReport decode_leave_reply(std::string_view text);
std::vector<SiteRow> decode_federation_reply(std::string_view text);
RosterReport decode_roster_reply(std::string_view text);

// Pretty-printed JSON of one report, for the commands' --json output.
std::string to_json_text(const StatusReport& report);
std::string to_json_text(const std::vector<PeerReport>& peers);
std::string to_json_text(const LeaveReport& report);
std::string to_json_text(const std::vector<SiteRow>& rows);
std::string to_json_text(const RosterReport& report);

}  // namespace meridian::daemon

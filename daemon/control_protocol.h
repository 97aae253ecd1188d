// What `meridian status`, `peers` and `leave` ask a running daemon and what it answers, as plain
// structs, and their JSON encoding on the control socket (one small JSON object per message):
//   request  {"version": 1, "command": "status" | "peers" | "leave"}
//   reply    {"ok": true, "status": {...}} | {"ok": true, "peers": [...]} | {"ok": true, "leave": {...}}
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

enum class ControlCommand { kStatus, kPeers, kLeave };
const char* to_string(ControlCommand command);

struct StatusReport {
  std::string site;
  std::string algorithm;
  std::string state;   // joining | training | leaving | stopped
  std::string listen;  // the address peers connect to
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  // The three measurements of the progress report are none until the first one (a few seconds into
  // training); in JSON their keys are absent then, and null stands for NaN (a diverged loss).
  std::optional<double> train_loss;
  std::optional<double> test_accuracy;  // fraction in [0, 1]; none before the first evaluation
  int peers_alive = 0;                  // including this site
  int peers_known = 0;                  // including this site
  std::uint64_t view_id = 0;
  std::uint64_t staleness = 0;  // steps ahead of the oldest expected mixer message
  double push_sum_weight = 1;
  std::optional<double> samples_per_second;
  std::optional<double> bytes_per_second;  // sent + received, recent average
  double uptime_seconds = 0;
  std::string last_checkpoint;  // path; empty before the first
  std::optional<double> checkpoint_age_seconds;
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

// A malformed request or reply; what() says what is wrong.
class ControlProtocolError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

std::string encode_request(ControlCommand command);
// Throws ControlProtocolError for anything that is not a valid request of this version.
ControlCommand decode_request(std::string_view text);

std::string encode_status_reply(const StatusReport& report);
std::string encode_peers_reply(const std::vector<PeerReport>& peers);
std::string encode_leave_reply(const LeaveReport& report);
std::string encode_error_reply(const std::string& error);

// Decode a reply to `command`. A daemon's {"ok": false} reply throws ControlProtocolError with its
// error text prefixed by "the daemon says: "; anything malformed throws ControlProtocolError too.
StatusReport decode_status_reply(std::string_view text);
std::vector<PeerReport> decode_peers_reply(std::string_view text);
LeaveReport decode_leave_reply(std::string_view text);

// Pretty-printed JSON of one report, for the commands' --json output.
std::string to_json_text(const StatusReport& report);
std::string to_json_text(const std::vector<PeerReport>& peers);
std::string to_json_text(const LeaveReport& report);

}  // namespace meridian::daemon

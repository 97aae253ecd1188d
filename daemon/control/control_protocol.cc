#include "daemon/control/control_protocol.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

namespace meridian::daemon {

using nlohmann::json;

// nlohmann's conventional hooks; optional fields travel as null.
namespace {

// JSON has no NaN or infinity (a diverged loss is NaN): such values travel as null and come back NaN.
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
double number_from(const json& j, const char* key) {
  const auto& v = j.at(key);
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}

template <typename T>
json optional_json(const std::optional<T>& v) {
  if constexpr (std::is_floating_point_v<T>) return v ? number(*v) : json(nullptr);
  return v ? json(*v) : json(nullptr);
}

// Strings from the network or the OS need not be UTF-8; replace bad bytes instead of throwing.
std::string dump(const json& j, int indent = -1) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }
template <typename T>
std::optional<T> optional_from(const json& j, const char* key) {
  const auto& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  return v.get<T>();
}

// A progress measurement: absent before the first, null for NaN (see StatusReport).
void put_measured(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = number(*v);
}
std::optional<double> measured_from(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return number_from(j, key);
}

}  // namespace

void to_json(json& j, const StatusReport& r) {
  j = json{{"site", r.site},
           {"algorithm", r.algorithm},
           {"state", r.state},
           {"listen", r.listen},
           {"step", r.step},
           {"epoch", r.epoch},
           {"test_accuracy", optional_json(r.test_accuracy)},
           {"peers_alive", r.peers_alive},
           {"peers_known", r.peers_known},
           {"view_id", r.view_id},
           {"staleness", r.staleness},
           {"push_sum_weight", number(r.push_sum_weight)},
           {"uptime_seconds", number(r.uptime_seconds)},
           {"last_checkpoint", r.last_checkpoint},
           {"checkpoint_age_seconds", optional_json(r.checkpoint_age_seconds)}};
  if (r.total_steps) j["total_steps"] = *r.total_steps;
  put_measured(j, "percent_done", r.percent_done);
  put_measured(j, "eta_seconds", r.eta_seconds);
  if (!r.notes.empty()) j["notes"] = r.notes;
  put_measured(j, "train_loss", r.train_loss);
  put_measured(j, "samples_per_second", r.samples_per_second);
  put_measured(j, "dp_epsilon_spent", r.dp_epsilon_spent);
  put_measured(j, "dp_epsilon_budget", r.dp_epsilon_budget);
  put_measured(j, "bytes_per_second", r.bytes_per_second);
  put_measured(j, "max_send_bytes_per_second", r.max_send_bytes_per_second);
  if (!r.shape.empty()) {
    j["shape"] = r.shape;
    if (r.shape_since_round) j["shape_since_round"] = *r.shape_since_round;
    put_measured(j, "shape_round_trip_seconds", r.shape_round_trip_seconds);
    put_measured(j, "shape_step_seconds", r.shape_step_seconds);
  }
  if (!r.round_timeout_basis.empty()) {
    j["round_timeout_seconds"] = number(r.round_timeout_seconds);
    j["round_timeout_basis"] = r.round_timeout_basis;
  }
  if (!r.heartbeat_timeout_basis.empty()) {
    j["heartbeat_timeout_seconds"] = number(r.heartbeat_timeout_seconds);
    j["heartbeat_timeout_basis"] = r.heartbeat_timeout_basis;
  }
}

void from_json(const json& j, StatusReport& r) {
  j.at("site").get_to(r.site);
  j.at("algorithm").get_to(r.algorithm);
  j.at("state").get_to(r.state);
  j.at("listen").get_to(r.listen);
  j.at("step").get_to(r.step);
  j.at("epoch").get_to(r.epoch);
  if (j.contains("total_steps")) r.total_steps = j.at("total_steps").get<std::uint64_t>();
  r.percent_done = measured_from(j, "percent_done");
  r.eta_seconds = measured_from(j, "eta_seconds");
  if (j.contains("notes")) j.at("notes").get_to(r.notes);
  r.train_loss = measured_from(j, "train_loss");
  r.test_accuracy = optional_from<double>(j, "test_accuracy");
  j.at("peers_alive").get_to(r.peers_alive);
  j.at("peers_known").get_to(r.peers_known);
  j.at("view_id").get_to(r.view_id);
  j.at("staleness").get_to(r.staleness);
  r.push_sum_weight = number_from(j, "push_sum_weight");
  r.samples_per_second = measured_from(j, "samples_per_second");
  r.dp_epsilon_spent = measured_from(j, "dp_epsilon_spent");
  r.dp_epsilon_budget = measured_from(j, "dp_epsilon_budget");
  r.bytes_per_second = measured_from(j, "bytes_per_second");
  r.max_send_bytes_per_second = measured_from(j, "max_send_bytes_per_second");
  r.uptime_seconds = number_from(j, "uptime_seconds");
  j.at("last_checkpoint").get_to(r.last_checkpoint);
  r.checkpoint_age_seconds = optional_from<double>(j, "checkpoint_age_seconds");
  if (j.contains("shape")) {
    j.at("shape").get_to(r.shape);
    r.shape_since_round = optional_from<std::uint64_t>(j, "shape_since_round");
    r.shape_round_trip_seconds = measured_from(j, "shape_round_trip_seconds");
    r.shape_step_seconds = measured_from(j, "shape_step_seconds");
  }
  if (j.contains("round_timeout_basis")) {
    r.round_timeout_seconds = number_from(j, "round_timeout_seconds");
    j.at("round_timeout_basis").get_to(r.round_timeout_basis);
  }
  if (j.contains("heartbeat_timeout_basis")) {
    r.heartbeat_timeout_seconds = number_from(j, "heartbeat_timeout_seconds");
    j.at("heartbeat_timeout_basis").get_to(r.heartbeat_timeout_basis);
  }
}

void to_json(json& j, const PeerReport& p) {
  j = json{{"name", p.name},
           {"address", p.address},
           {"state", p.state},
           {"rank", optional_json(p.rank)},
           {"rtt_seconds", optional_json(p.rtt_seconds)},
           {"last_heard_seconds", optional_json(p.last_heard_seconds)},
           {"bytes_sent", p.bytes_sent},
           {"bytes_received", p.bytes_received}};
}

void from_json(const json& j, PeerReport& p) {
  j.at("name").get_to(p.name);
  j.at("address").get_to(p.address);
  j.at("state").get_to(p.state);
  p.rank = optional_from<int>(j, "rank");
  p.rtt_seconds = optional_from<double>(j, "rtt_seconds");
  p.last_heard_seconds = optional_from<double>(j, "last_heard_seconds");
  j.at("bytes_sent").get_to(p.bytes_sent);
  j.at("bytes_received").get_to(p.bytes_received);
}

void to_json(json& j, const LeaveReport& r) {
  j = json{{"accepted", r.accepted}, {"message", r.message}, {"effective_round", optional_json(r.effective_round)}};
}

void from_json(const json& j, LeaveReport& r) {
  j.at("accepted").get_to(r.accepted);
  j.at("message").get_to(r.message);
  r.effective_round = optional_from<std::uint64_t>(j, "effective_round");
}

void to_json(json& j, const SiteRow& r) {
  j = json{{"site", r.site},
           {"self", r.self},
           {"state", r.state},
           {"step", r.step},
           {"epoch", r.epoch},
           {"train_loss", optional_json(r.train_loss)},
           {"test_accuracy", optional_json(r.test_accuracy)},
           {"samples_per_second", optional_json(r.samples_per_second)},
           {"push_sum_weight", number(r.push_sum_weight)},
           {"staleness", r.staleness},
           {"last_heard_seconds", optional_json(r.last_heard_seconds)}};
}

void from_json(const json& j, SiteRow& r) {
  j.at("site").get_to(r.site);
  j.at("self").get_to(r.self);
  j.at("state").get_to(r.state);
  j.at("step").get_to(r.step);
  j.at("epoch").get_to(r.epoch);
  r.train_loss = optional_from<double>(j, "train_loss");
  r.test_accuracy = optional_from<double>(j, "test_accuracy");
  r.samples_per_second = optional_from<double>(j, "samples_per_second");
  r.push_sum_weight = number_from(j, "push_sum_weight");
  j.at("staleness").get_to(r.staleness);
  r.last_heard_seconds = optional_from<double>(j, "last_heard_seconds");
}

void to_json(json& j, const RosterSite& s) {
  j = json{{"name", s.name}, {"public_key", s.public_key}, {"address", s.address}};
}

void from_json(const json& j, RosterSite& s) {
  j.at("name").get_to(s.name);
  j.at("public_key").get_to(s.public_key);
  j.at("address").get_to(s.address);
}

void to_json(json& j, const RosterReport& r) { j = json{{"message", r.message}, {"file", r.file}, {"sites", r.sites}}; }

void from_json(const json& j, RosterReport& r) {
  j.at("message").get_to(r.message);
  j.at("file").get_to(r.file);
  j.at("sites").get_to(r.sites);
}

namespace {

json parse_object(std::string_view text, const char* what) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw ControlProtocolError(std::string(what) + " is not a JSON object");
  }
  return j;
}

// The payload under `key` of a successful reply.
json reply_payload(std::string_view text, const char* key) {
  const json j = parse_object(text, "the daemon's reply");
  const auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean()) throw ControlProtocolError("the daemon's reply has no \"ok\" field");
  if (!ok->get<bool>()) {
    // The daemon understood and refused what the operator asked (a roster change it does not make, a
    // command this site cannot serve): the operator's to fix, as the reason says.
    const auto error = j.find("error");
    throw error::UserError("the daemon says: " + (error != j.end() && error->is_string() ? error->get<std::string>()
                                                                                             : "(no reason given)"));
  }
  const auto payload = j.find(key);
  if (payload == j.end()) throw ControlProtocolError(std::string("the daemon's reply has no \"") + key + "\" field");
  return *payload;
}

template <typename T>
T decode_payload(std::string_view text, const char* key) {
  try {
    return reply_payload(text, key).get<T>();
  } catch (const json::exception& e) {
    throw ControlProtocolError(std::string("the daemon's reply has a malformed \"") + key + "\": " + e.what());
  }
}

}  // namespace

const char* to_string(ControlCommand command) {
  switch (command) {
    case ControlCommand::kStatus: return "status";
    case ControlCommand::kPeers: return "peers";
    case ControlCommand::kLeave: return "leave";
    case ControlCommand::kFederation: return "federation";
    case ControlCommand::kRoster: return "roster";
  }
  return "?";
}

const char* to_string(RosterChange::Action action) {
  switch (action) {
    case RosterChange::Action::kList: return "list";
    case RosterChange::Action::kAdd: return "add";
    case RosterChange::Action::kRemove: return "remove";
    case RosterChange::Action::kReload: return "reload";
  }
  return "?";
}

std::string encode_request(ControlCommand command) {
  return dump(json{{"version", kControlProtocolVersion}, {"command", to_string(command)}});
}

std::string encode_roster_request(const RosterChange& change) {
  return dump(json{{"version", kControlProtocolVersion},
                   {"command", to_string(ControlCommand::kRoster)},
                   {"roster",
                    {{"action", to_string(change.action)},
                     {"name", change.name},
                     {"public_key", change.public_key},
                     {"address", change.address}}}});
}

namespace {

RosterChange decode_roster_change(const json& j) {
  const auto roster = j.find("roster");
  if (roster == j.end() || !roster->is_object()) throw ControlProtocolError("the roster request has no \"roster\"");
  const auto text = [&](const char* key) {
    const auto v = roster->find(key);
    if (v == roster->end()) return std::string();
    if (!v->is_string()) throw ControlProtocolError(std::string("the roster request's \"") + key + "\" is not text");
    return v->get<std::string>();
  };
  RosterChange change;
  const std::string action = text("action");
  bool known = false;
  for (auto a : {RosterChange::Action::kList, RosterChange::Action::kAdd, RosterChange::Action::kRemove,
                 RosterChange::Action::kReload}) {
    if (action == to_string(a)) {
      change.action = a;
      known = true;
    }
  }
  if (!known) throw ControlProtocolError("unknown roster action '" + action + "' (known: list, add, remove, reload)");
  change.name = text("name");
  change.public_key = text("public_key");
  change.address = text("address");
  return change;
}

}  // namespace

ControlRequest decode_control_request(std::string_view text) {
  const json j = parse_object(text, "the request");
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int>() != kControlProtocolVersion) {
    throw ControlProtocolError("unsupported protocol version (this daemon speaks version " +
                               std::to_string(kControlProtocolVersion) +
                               "; use the meridian command of the same release)");
  }
  const auto command = j.find("command");
  if (command == j.end() || !command->is_string()) throw ControlProtocolError("the request has no \"command\"");
  const auto name = command->get<std::string>();
  for (auto c : {ControlCommand::kStatus, ControlCommand::kPeers, ControlCommand::kLeave, ControlCommand::kFederation,
                 ControlCommand::kRoster}) {
    if (name == to_string(c)) {
      ControlRequest request{c, {}};
      if (c == ControlCommand::kRoster) request.roster = decode_roster_change(j);
      return request;
    }
  }
  throw ControlProtocolError("unknown command '" + name + "' (known: status, peers, leave, federation, roster)");
}

ControlCommand decode_request(std::string_view text) { return decode_control_request(text).command; }

std::string encode_status_reply(const StatusReport& report) { return dump(json{{"ok", true}, {"status", report}}); }
std::string encode_peers_reply(const std::vector<PeerReport>& peers) {
  return dump(json{{"ok", true}, {"peers", peers}});
}
std::string encode_leave_reply(const LeaveReport& report) { return dump(json{{"ok", true}, {"leave", report}}); }
std::string encode_federation_reply(const std::vector<SiteRow>& rows) {
  return dump(json{{"ok", true}, {"federation", rows}});
}
std::string encode_roster_reply(const RosterReport& report) { return dump(json{{"ok", true}, {"roster", report}}); }
std::string encode_error_reply(const std::string& error) { return dump(json{{"ok", false}, {"error", error}}); }

StatusReport decode_status_reply(std::string_view text) { return decode_payload<StatusReport>(text, "status"); }
std::vector<PeerReport> decode_peers_reply(std::string_view text) {
  return decode_payload<std::vector<PeerReport>>(text, "peers");
}
LeaveReport decode_leave_reply(std::string_view text) { return decode_payload<LeaveReport>(text, "leave"); }
std::vector<SiteRow> decode_federation_reply(std::string_view text) {
  return decode_payload<std::vector<SiteRow>>(text, "federation");
}
RosterReport decode_roster_reply(std::string_view text) { return decode_payload<RosterReport>(text, "roster"); }

std::string to_json_text(const StatusReport& report) { return dump(json(report), 2); }
std::string to_json_text(const std::vector<PeerReport>& peers) { return dump(json(peers), 2); }
std::string to_json_text(const LeaveReport& report) { return dump(json(report), 2); }
std::string to_json_text(const std::vector<SiteRow>& rows) { return dump(json(rows), 2); }
std::string to_json_text(const RosterReport& report) { return dump(json(report), 2); }

}  // namespace meridian::daemon

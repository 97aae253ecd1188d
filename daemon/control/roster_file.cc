#include "daemon/control/roster_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "daemon/files/safe_file.h"
#include "error/error.h"
#include "peer/curve_keys.h"
#include "peer/printable_text.h"
#include "peer/site_address.h"

namespace meridian::daemon {

std::optional<std::string> roster_entry_problem(const peer::Roster::Entry& entry) {
  if (!peer::is_valid_site_name(entry.name))
    return "site name '" + peer::printable_text(entry.name) + "' must be 1-64 letters, digits, '.', '_' or '-'";
  if (!peer::is_z85_key(entry.public_key))
    return "public key '" + peer::printable_text(entry.public_key) + "' of '" + entry.name +
           "' is not a 40-character Z85 CurveZMQ key";
  if (!entry.address.empty()) {
    if (const auto why = peer::site_address_problem(entry.address))
      return "address of '" + entry.name + "' must look like tcp://host:port, got '" + peer::printable_text(entry.address) +
             "': " + *why;
  }
  return std::nullopt;
}

std::string roster_text_adding(const std::string& text, const peer::Roster::Entry& entry, const std::string& source) {
  if (const auto problem = roster_entry_problem(entry)) throw error::UserError(*problem);
  const auto before = peer::Roster::parse(text, source);
  if (const auto* same = before.by_name(entry.name)) {
    throw error::UserError("site '" + entry.name + "' is already in " + source + " (key " + same->public_key +
                           "); to give it another key, remove it first");
  }
  if (const auto* same = before.by_key(entry.public_key)) {
    throw error::UserError("key " + entry.public_key + " is already in " + source + ", as site '" + same->name + "'");
  }
  peer::Roster check = before;
  check.add(entry);
  std::string out = text;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += entry.name + " " + entry.public_key + (entry.address.empty() ? "" : " " + entry.address) + "\n";
  return out;
}

std::string roster_text_removing(const std::string& text, const std::string& name, const std::string& source) {
  const auto before = peer::Roster::parse(text, source);
  if (!before.by_name(name)) {
    std::string listed;
    for (const auto& e : before.entries()) listed += (listed.empty() ? "" : ", ") + e.name;
    throw error::UserError("site '" + name + "' is not in " + source + " (it lists: " + listed + ")");
  }
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string first;
    // A site may be called "quorum"; the quorum line is not its line.
    if (!peer::Roster::is_quorum_line(line) && fields >> first && first == name) continue;
    out += line + "\n";
  }
  return out;
}

std::string read_roster_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw error::UserError("cannot read roster " + file.string() + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  std::istringstream lines(content);
  std::string line;
  for (int lineno = 1; std::getline(lines, line); ++lineno) {
    const auto where = [&] { return "roster " + file.string() + " line " + std::to_string(lineno) + ": "; };
    if (!line.empty() && line.back() == '\r') line.pop_back();
    for (const unsigned char c : line) {
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        throw error::UserError(where() + "holds the control character " +
                               peer::printable_text(std::string(1, static_cast<char>(c))) + " ('" + peer::printable_text(line) +
                               "'); a roster line is NAME PUBLIC_KEY [ADDRESS] in plain text");
    }
    if (peer::Roster::is_quorum_line(line)) continue;  // checked by peer::Roster::parse
    std::istringstream fields(line);
    std::string name, key, address;
    if (!(fields >> name) || name[0] == '#') continue;
    if (fields >> key >> address) {
      if (const auto why = peer::site_address_problem(address))
        throw error::UserError(where() + "address of '" + peer::printable_text(name) + "' must look like tcp://host:port, got '" +
                               peer::printable_text(address) + "': " + *why);
    }
  }
  return content;
}

void write_roster_text(const std::filesystem::path& file, const std::string& text) {
  std::error_code ec;
  const auto perms = std::filesystem::status(file, ec).permissions();
  const mode_t mode = ec ? 0644 : static_cast<mode_t>(perms) & 07777;
  try {
    replace_file(file, text, mode);
  } catch (const error::UserError& e) {
    throw error::UserError(std::string("roster not changed: ") + e.what() + "; the roster in force is unchanged");
  }
}

std::string describe_roster_change(const peer::Roster& before, const peer::Roster& after) {
  std::string added, removed, rekeyed;
  const auto append = [](std::string& list, const std::string& name) { list += (list.empty() ? "" : ", ") + name; };
  for (const auto& e : after.entries()) {
    const auto* old = before.by_name(e.name);
    if (!old) append(added, e.name);
    else if (old->public_key != e.public_key) append(rekeyed, e.name);
  }
  for (const auto& e : before.entries())
    if (!after.by_name(e.name)) append(removed, e.name);
  std::string out;
  if (!added.empty()) out += "added " + added;
  if (!removed.empty()) out += (out.empty() ? "" : "; ") + std::string("removed ") + removed;
  if (!rekeyed.empty()) out += (out.empty() ? "" : "; ") + std::string("new key for ") + rekeyed;
  return out.empty() ? "no change" : out;
}

}  // namespace meridian::daemon

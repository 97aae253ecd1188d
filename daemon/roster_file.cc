#include "daemon/roster_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "daemon/safe_file.h"
#include "error/error.h"

namespace meridian::daemon {

std::string roster_text_adding(const std::string& text, const peer::Roster::Entry& entry, const std::string& source) {
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
    if (fields >> first && first == name) continue;
    out += line + "\n";
  }
  return out;
}

std::string read_roster_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw error::UserError("cannot read roster " + file.string() + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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

#include "peer/roster.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "error/error.h"
#include "peer/curve_keys.h"
#include "peer/printable_text.h"
#include "peer/site_address.h"

namespace meridian::peer {

bool is_valid_site_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

void Roster::add(Entry e) {
  if (!is_valid_site_name(e.name))
    throw error::UserError("site name '" + e.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  if (!is_z85_key(e.public_key))
    throw error::UserError("public key of '" + e.name + "' is not a 40-character Z85 CurveZMQ key");
  if (!e.address.empty()) {
    if (auto problem = site_address_problem(e.address))
      throw error::UserError("address of '" + e.name + "' must look like tcp://host:port, got '" +
                             printable_text(e.address) + "': " + *problem);
  }
  if (by_name(e.name)) throw error::UserError("site '" + e.name + "' is listed twice");
  if (const auto* other = by_key(e.public_key))
    throw error::UserError("sites '" + other->name + "' and '" + e.name + "' share one public key");
  entries_.push_back(std::move(e));
}

bool Roster::is_quorum_line(std::string_view line) {
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  line.remove_prefix(start);
  constexpr std::string_view kWord = "quorum";
  if (!line.starts_with(kWord)) return false;
  line.remove_prefix(kWord.size());
  const auto after = line.find_first_not_of(" \t");
  return after != std::string_view::npos && line[after] == '=';
}

namespace {

// The N of a quorum line ("quorum = N"), or the problem with it.
std::size_t quorum_of(const std::string& line, const std::string& where) {
  std::string value = line.substr(line.find('=') + 1);
  const auto first = value.find_first_not_of(" \t\r");
  const auto last = value.find_last_not_of(" \t\r");
  value = first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n == 0)
    throw error::UserError(where + "quorum must be a whole number of sites, at least 1 (e.g. 'quorum = 2'), got '" +
                           printable_text(value) + "'");
  return n;
}

}  // namespace

Roster Roster::parse(std::string_view text, const std::string& source) {
  Roster roster;
  std::istringstream in{std::string(text)};
  std::string line;
  int quorum_line = 0;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (is_quorum_line(line)) {
      const std::string where = source + " line " + std::to_string(lineno) + ": ";
      if (quorum_line != 0)
        throw error::UserError(where + "a second quorum line (the first is line " + std::to_string(quorum_line) +
                               "); a roster states at most one");
      roster.quorum_ = quorum_of(line, where);
      quorum_line = lineno;
      continue;
    }
    std::istringstream fields(line);
    std::string first;
    if (!(fields >> first) || first[0] == '#') continue;
    Entry e{first, {}, {}};
    std::string extra;
    if (!(fields >> e.public_key))
      throw error::UserError(source + " line " + std::to_string(lineno) + ": expected 'NAME PUBLIC_KEY [ADDRESS]'");
    fields >> e.address;
    if (fields >> extra)
      throw error::UserError(source + " line " + std::to_string(lineno) + ": unexpected '" + extra +
                             "' after the address");
    try {
      roster.add(std::move(e));
    } catch (const error::UserError& err) {
      throw error::UserError(source + " line " + std::to_string(lineno) + ": " + err.what());
    }
  }
  if (roster.quorum_ && *roster.quorum_ > roster.entries_.size())
    throw error::UserError(source + " line " + std::to_string(quorum_line) + ": quorum " +
                           std::to_string(*roster.quorum_) + " is more than the " +
                           std::to_string(roster.entries_.size()) + " site" +
                           (roster.entries_.size() == 1 ? "" : "s") +
                           " the roster lists; a quorum is at most the roster's size");
  return roster;
}

Roster Roster::load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw error::UserError("cannot read roster " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  Roster r = parse(text.str(), "roster " + file.string());
  if (r.entries().empty()) throw error::UserError("roster " + file.string() + " lists no site");
  return r;
}

const Roster::Entry* Roster::by_name(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const Roster::Entry* Roster::by_key(std::string_view public_key) const {
  for (const auto& e : entries_)
    if (e.public_key == public_key) return &e;
  return nullptr;
}

const Roster::Entry* Roster::by_address(std::string_view address) const {
  for (const auto& e : entries_)
    if (!e.address.empty() && e.address == address) return &e;
  return nullptr;
}

std::string Roster::to_text() const {
  std::string out = "# Meridian roster: NAME PUBLIC_KEY [ADDRESS]\n";
  if (quorum_) out += "quorum = " + std::to_string(*quorum_) + "\n";
  for (const auto& e : entries_) out += e.name + " " + e.public_key + (e.address.empty() ? "" : " " + e.address) + "\n";
  return out;
}

}  // namespace meridian::peer

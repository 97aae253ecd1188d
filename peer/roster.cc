#include "peer/roster.h"

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

Roster Roster::parse(std::string_view text, const std::string& source) {
  Roster roster;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
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
  for (const auto& e : entries_) out += e.name + " " + e.public_key + (e.address.empty() ? "" : " " + e.address) + "\n";
  return out;
}

}  // namespace meridian::peer

// The roster: the sites allowed in a federation. A plain text file, one site per line:
//
//   # comment lines start with '#'; blank lines are ignored
//   quorum = 2
//   NAME  PUBLIC_KEY  [ADDRESS]
//   oregon  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7  tcp://10.0.0.1:7000
//
// NAME: letters, digits, '.', '_' and '-' (at most 64). PUBLIC_KEY: the 40-character Z85 key that
// `meridian keygen` prints. ADDRESS: optional tcp://host:port where the site listens (a site address,
// peer/site_address.h); in secure mode it is where this site dials that site, whatever the site
// announces. Names and keys must be unique.
//
// `quorum = N` (at most one such line, anywhere in the file; spaces around '=' optional): how many of
// the listed sites must be in the view before training starts, when a site is not given --min-sites
// (daemon/federation/min_sites.h). 1 <= N <= the number of sites listed. Without it, every listed site must be.
// No site line can look like it: a public key is never '='.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meridian::peer {

class Roster {
 public:
  struct Entry {
    std::string name;
    std::string public_key;
    std::string address;  // empty when not given
  };

  // Parses roster text; `source` names it in errors. Throws error::UserError "SOURCE line N: ...",
  // also for a quorum that is not a whole number from 1 to the number of sites listed (naming both).
  static Roster parse(std::string_view text, const std::string& source = "roster");
  // Reads and parses a roster file. Throws error::UserError naming the file.
  static Roster load(const std::filesystem::path& file);

  const Entry* by_name(std::string_view name) const;
  const Entry* by_key(std::string_view public_key) const;
  const Entry* by_address(std::string_view address) const;
  const std::vector<Entry>& entries() const { return entries_; }
  // The quorum the file states (see above); nullopt when it states none.
  std::optional<std::size_t> quorum() const { return quorum_; }

  // Whether `line` (one line of a roster file) is a quorum line, well-formed or not: its first word is
  // "quorum" followed by '=', or starts with "quorum=".
  static bool is_quorum_line(std::string_view line);

  // Roster text in the format above, the quorum line included (round-trips through parse).
  std::string to_text() const;

  void add(Entry e);  // throws error::UserError on a bad or duplicate entry

 private:
  std::vector<Entry> entries_;
  std::optional<std::size_t> quorum_;
};

// True when `name` is a valid site name (see above).
bool is_valid_site_name(std::string_view name);

}  // namespace meridian::peer

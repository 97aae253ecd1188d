// The roster: the sites allowed in a federation. A plain text file, one site per line:
//
//   # comment lines start with '#'; blank lines are ignored
//   NAME  PUBLIC_KEY  [ADDRESS]
//   oregon  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7  tcp://10.0.0.1:7000
//
// NAME: letters, digits, '.', '_' and '-' (at most 64). PUBLIC_KEY: the 40-character Z85 key that
// `meridian keygen` prints. ADDRESS: optional tcp://host:port where the site listens (a site address,
// peer/site_address.h); in secure mode it is where this site dials that site, whatever the site
// announces. Names and keys must be unique.
#pragma once

#include <filesystem>
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

  // Parses roster text; `source` names it in errors. Throws error::UserError "SOURCE line N: ...".
  static Roster parse(std::string_view text, const std::string& source = "roster");
  // Reads and parses a roster file. Throws error::UserError naming the file.
  static Roster load(const std::filesystem::path& file);

  const Entry* by_name(std::string_view name) const;
  const Entry* by_key(std::string_view public_key) const;
  const Entry* by_address(std::string_view address) const;
  const std::vector<Entry>& entries() const { return entries_; }

  // Roster text in the format above (round-trips through parse).
  std::string to_text() const;

  void add(Entry e);  // throws error::UserError on a bad or duplicate entry

 private:
  std::vector<Entry> entries_;
};

// True when `name` is a valid site name (see above).
bool is_valid_site_name(std::string_view name);

}  // namespace meridian::peer

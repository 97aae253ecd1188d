// The roster file of a running site and the changes `meridian roster add|remove|reload` make to it
// (the format: peer/roster.h). An edit keeps the rest of the file as the operator wrote it (comments,
// order, addresses): adding appends one line, removing drops the lines of that one site. The file is
// the roster's only record, so a change survives a restart.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "peer/roster.h"

namespace meridian::daemon {

// What is wrong with an entry to be written into a roster file, or nullopt when nothing is: a name
// that is not 1-64 letters, digits, '.', '_' or '-'; a key that is not 40 characters of Z85; an
// address (when given) that is not exactly tcp://HOST:PORT, HOST a name, an IPv4 address or an
// [IPv6] address and PORT in 1..65535. Whitespace and control characters are refused in every field,
// so that no entry can add a line of its own. The text shows control characters escaped (\n, \x1b).
std::optional<std::string> roster_entry_problem(const peer::Roster::Entry& entry);

// `text` (a roster file's content) with the line "NAME PUBLIC_KEY [ADDRESS]" of `entry` appended.
// Throws error::UserError when the entry has a problem (roster_entry_problem) or the result is not a
// valid roster (a name or key already listed: the message names both entries).
std::string roster_text_adding(const std::string& text, const peer::Roster::Entry& entry, const std::string& source);
// `text` without the lines that list site `name`. Throws error::UserError naming the sites listed
// when `name` is not one of them.
std::string roster_text_removing(const std::string& text, const std::string& name, const std::string& source);

// Reads the whole file. Throws error::UserError naming it, and naming the line when a line holds a
// control character other than a tab (or a carriage return at its end) or an address that is not
// exactly tcp://HOST:PORT.
std::string read_roster_text(const std::filesystem::path& file);
// Replaces the file's content atomically (a temporary file beside it, renamed over it), keeping its
// permission bits. Throws error::UserError naming the file and the system's reason.
void write_roster_text(const std::filesystem::path& file, const std::string& text);

// For people: what differs from `before` to `after` ("added gamma; removed delta; new key for beta"),
// or "no change".
std::string describe_roster_change(const peer::Roster& before, const peer::Roster& after);

}  // namespace meridian::daemon

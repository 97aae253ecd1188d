// The roster file of a running site and the changes `meridian roster add|remove|reload` make to it
// (the format: peer/roster.h). An edit keeps the rest of the file as the operator wrote it (comments,
// order, addresses): adding appends one line, removing drops the lines of that one site. The file is
// the roster's only record, so a change survives a restart.
#pragma once

#include <filesystem>
#include <string>

#include "peer/roster.h"

namespace meridian::daemon {

// `text` (a roster file's content) with the line "NAME PUBLIC_KEY [ADDRESS]" of `entry` appended.
// Throws error::UserError when the result is not a valid roster (a bad key, a name or key already
// listed: the message names both entries).
std::string roster_text_adding(const std::string& text, const peer::Roster::Entry& entry, const std::string& source);
// `text` without the lines that list site `name`. Throws error::UserError naming the sites listed
// when `name` is not one of them.
std::string roster_text_removing(const std::string& text, const std::string& name, const std::string& source);

// Reads the whole file. Throws error::UserError naming it.
std::string read_roster_text(const std::filesystem::path& file);
// Replaces the file's content atomically (a temporary file beside it, renamed over it), keeping its
// permission bits. Throws error::UserError naming the file and the system's reason.
void write_roster_text(const std::filesystem::path& file, const std::string& text);

// For people: what differs from `before` to `after` ("added gamma; removed delta; new key for beta"),
// or "no change".
std::string describe_roster_change(const peer::Roster& before, const peer::Roster& after);

}  // namespace meridian::daemon

// Numbers for people: byte counts, rates and durations in the progress line and the CLI's tables.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace meridian::daemon {

// Decimal units (network convention): "0 B", "512 B", "1.5 kB", "24 MB", "3.1 GB".
std::string format_bytes(double bytes);
// format_bytes + "/s".
std::string format_rate(double bytes_per_second);
// "850 ms", "42 s", "3 min 12 s", "1 h 02 min", "2 d 03 h"; negative or NaN gives "-".
std::string format_duration(double seconds);
// "1 site", "0 sites", "3 sites": the count and the noun, made plural by an "s" unless the count is 1.
std::string format_count(std::size_t count, std::string_view noun);

}  // namespace meridian::daemon

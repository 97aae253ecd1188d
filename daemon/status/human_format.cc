#include "daemon/status/human_format.h"

#include <cmath>
#include <cstdio>

namespace meridian::daemon {

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes) || bytes < 0) return "-";
  static const char* const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  while (bytes >= 999.5 && unit < 5) {
    bytes /= 1000;
    ++unit;
  }
  char buf[32];
  // Whole bytes never get a decimal; otherwise keep two or three significant digits.
  if (unit == 0 || bytes >= 9.95) {
    std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[unit]);
  }
  return buf;
}

std::string format_rate(double bytes_per_second) {
  const auto bytes = format_bytes(bytes_per_second);
  return bytes == "-" ? bytes : bytes + "/s";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  char buf[32];
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1000);
    return buf;
  }
  const auto s = static_cast<long long>(seconds);
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lld s", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", s / 60, s % 60);
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", s / 3600, s % 3600 / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld d %02lld h", s / 86400, s % 86400 / 3600);
  }
  return buf;
}

std::string format_count(std::size_t count, std::string_view noun) {
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

}  // namespace meridian::daemon

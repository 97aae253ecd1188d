#include "peer/partition_schedule.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

#include "error/error.h"

namespace meridian::peer {

namespace {

constexpr std::string_view kExample = "s0,s1|s2,s3@20s+10s";
constexpr std::string_view kWildcard = "*";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(std::string_view text, const std::string& problem) {
  throw error::UserError("partition schedule \"" + std::string(text) + "\": " + problem + " (e.g. " +
                         std::string(kExample) + ")");
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = s.find(sep);
    out.push_back(trim(s.substr(0, at)));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::chrono::microseconds parse_time(std::string_view text, std::string_view value, const char* what) {
  double number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  const std::string_view unit(end, static_cast<std::size_t>(value.data() + value.size() - end));
  if (ec != std::errc() || end == value.data() || !(number >= 0))
    fail(text, std::string(what) + " \"" + std::string(value) + "\" is not a duration >= 0");
  double scale = 0;
  if (unit == "us") scale = 1;
  else if (unit == "ms") scale = 1e3;
  else if (unit == "s") scale = 1e6;
  else fail(text, std::string(what) + " \"" + std::string(value) + "\" needs a unit: us, ms or s");
  return std::chrono::microseconds(static_cast<long long>(number * scale + 0.5));
}

}  // namespace

bool PartitionSchedule::cuts(std::string_view self, std::string_view peer,
                             std::chrono::microseconds since_start) const {
  for (const auto& w : windows_) {
    if (since_start < w.start) continue;
    const auto into = since_start - w.start;
    if ((w.period.count() > 0 ? into % w.period : into) >= w.length) continue;
    auto group_of = [&](std::string_view name) -> int {
      int wildcard = -1;
      for (std::size_t g = 0; g < w.groups.size(); ++g) {
        if (w.groups[g].size() == 1 && w.groups[g][0] == kWildcard) wildcard = static_cast<int>(g);
        else if (std::find(w.groups[g].begin(), w.groups[g].end(), name) != w.groups[g].end()) return static_cast<int>(g);
      }
      return wildcard;
    };
    const int a = group_of(self), b = group_of(peer);
    if (a >= 0 && b >= 0 && a != b) return true;
  }
  return false;
}

PartitionSchedule parse_partition_schedule(std::string_view text) {
  std::vector<PartitionWindow> windows;
  if (trim(text).empty()) return PartitionSchedule{};
  for (auto part : split(text, ';')) {
    const auto at = part.find('@');
    if (at == std::string_view::npos) fail(text, "a window needs GROUPS@START+LENGTH");
    auto when = trim(part.substr(at + 1));
    PartitionWindow w;
    constexpr std::string_view kEvery = " every ";
    const auto every = when.find(kEvery);
    if (every != std::string_view::npos) {
      w.period = parse_time(text, trim(when.substr(every + kEvery.size())), "period");
      when = trim(when.substr(0, every));
    }
    const auto plus = when.find('+');
    if (plus == std::string_view::npos) fail(text, "a window needs START+LENGTH after '@'");
    w.start = parse_time(text, trim(when.substr(0, plus)), "start");
    w.length = parse_time(text, trim(when.substr(plus + 1)), "length");
    if (w.length.count() == 0) fail(text, "a window's length must be above 0");
    if (every != std::string_view::npos && w.period <= w.length)
      fail(text, "a repeating window's period must exceed its length (\"s0|s1@30s+30s every 180s\")");
    std::vector<std::string> seen;
    bool wildcard = false;
    for (auto group : split(trim(part.substr(0, at)), '|')) {
      std::vector<std::string> names;
      if (group == kWildcard) {
        if (wildcard) fail(text, "one '*' per window");
        wildcard = true;
        w.groups.push_back({std::string(kWildcard)});
        continue;
      }
      for (auto name : split(group, ',')) {
        if (name.empty()) fail(text, "an empty site name");
        if (name == kWildcard) fail(text, "'*' is a group of its own (\"s3|*@20s+2s\")");
        if (std::find(seen.begin(), seen.end(), name) != seen.end())
          fail(text, "site \"" + std::string(name) + "\" is in two groups of one window");
        seen.emplace_back(name);
        names.emplace_back(name);
      }
      w.groups.push_back(std::move(names));
    }
    if (w.groups.size() < 2) fail(text, "a window needs at least two groups separated by '|'");
    windows.push_back(std::move(w));
  }
  return PartitionSchedule(std::move(windows));
}

}  // namespace meridian::peer

#include "peer/wan_model.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "error/error.h"

namespace meridian::peer {

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kWorld4 = "world4";

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// One-way latencies in ms of docs/wan-emulation.md, half the round trips measured between these AWS regions.
constexpr std::array<const char*, 4> kWorld4Names = {"oregon", "ohio", "london", "tokyo"};
constexpr std::array<std::array<int, 4>, 4> kWorld4LatencyMs = {{
    //  OR   OH   LD   TK
    {1, 50, 135, 100},   // oregon
    {50, 1, 85, 155},    // ohio
    {135, 85, 1, 277},   // london
    {100, 155, 277, 1},  // tokyo
}};

}  // namespace

WanModel::WanModel() : WanModel({"all"}, {LinkSpec{}}, "") {}

WanModel::WanModel(std::vector<std::string> names, std::vector<LinkSpec> links, std::string spec)
    : names_(std::move(names)), links_(std::move(links)), spec_(std::move(spec)) {}

WanModel WanModel::uniform(const LinkSpec& link) { return WanModel({"all"}, {link}, link.to_string()); }

WanModel WanModel::world4(const LinkSpec& extra) {
  if (extra.latency.count() != 0) {
    throw error::UserError("wan spec \"world4," + extra.to_string() +
                           "\": world4 fixes the latency of every link; drop latency= (jitter, bandwidth "
                           "and loss may be added, e.g. world4,bandwidth=20mbit,jitter=5ms)");
  }
  std::vector<std::string> names(kWorld4Names.begin(), kWorld4Names.end());
  std::vector<LinkSpec> links;
  for (const auto& row : kWorld4LatencyMs) {
    for (int ms : row) {
      LinkSpec l = extra;
      l.latency = milliseconds(ms);
      links.push_back(l);
    }
  }
  const std::string rest = extra.to_string();
  return WanModel(std::move(names), std::move(links), std::string(kWorld4) + (rest.empty() ? "" : "," + rest));
}

std::optional<std::size_t> WanModel::region_index(std::string_view name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) return std::nullopt;
  return static_cast<std::size_t>(it - names_.begin());
}

const LinkSpec& WanModel::link(std::size_t from_region, std::size_t to_region) const {
  if (from_region >= regions() || to_region >= regions()) {
    throw error::InternalError("wan model: region " + std::to_string(std::max(from_region, to_region)) +
                               " is out of range (" + std::to_string(regions()) + " regions)");
  }
  return links_[from_region * regions() + to_region];
}

const LinkSpec& WanModel::link(std::string_view from_region, std::string_view to_region) const {
  auto index = [&](std::string_view name) {
    if (auto i = region_index(name)) return *i;
    std::string known;
    for (const auto& n : names_) known += (known.empty() ? "" : ", ") + n;
    throw error::UserError("wan model: unknown region \"" + std::string(name) + "\" (regions: " + known + ")");
  };
  const std::size_t from = index(from_region);
  return link(from, index(to_region));
}

bool WanModel::emulates() const {
  return std::any_of(links_.begin(), links_.end(), [](const LinkSpec& l) { return !l.is_none(); });
}

WanModel parse_wan_spec(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  if (t.starts_with(kWorld4) && (t.size() == kWorld4.size() || t[kWorld4.size()] == ',' || t[kWorld4.size()] == ' ')) {
    std::string_view rest = t.substr(kWorld4.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.empty()) {
      if (rest.front() != ',') {
        throw error::UserError("wan spec \"" + std::string(text) +
                               "\": expected a comma after world4 (e.g. world4,bandwidth=20mbit,jitter=5ms)");
      }
      rest.remove_prefix(1);
    }
    const LinkSpec extra = parse_link_spec(rest);
    if (extra.latency.count() != 0) {
      throw error::UserError("wan spec \"" + std::string(text) +
                             "\": world4 fixes the latency of every link; drop latency= (jitter, bandwidth "
                             "and loss may be added, e.g. world4,bandwidth=20mbit,jitter=5ms)");
    }
    return WanModel::world4(extra);
  }
  // A bare word is a preset name, not a malformed field: say which presets exist.
  const std::string_view first = trim_spaces(t.substr(0, t.find(',')));
  if (!first.empty() && first.find('=') == std::string_view::npos) {
    throw error::UserError("wan spec \"" + std::string(text) + "\": unknown preset \"" + std::string(first) +
                           "\" (known: world4) and not a link spec (e.g. latency=120ms,jitter=10ms,"
                           "bandwidth=50mbit,loss=0.001)");
  }
  return WanModel::uniform(parse_link_spec(text));
}

}  // namespace meridian::peer

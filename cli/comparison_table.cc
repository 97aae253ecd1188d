#include "cli/comparison_table.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "daemon/status/human_format.h"

namespace meridian::cli {
namespace {

const char* const kMissing = "\xE2\x80\x94";  // "—"

std::string percent(const std::optional<double>& fraction) {
  if (!fraction) return kMissing;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *fraction * 100);
  return buf;
}

// Display width of UTF-8 text: one column per code point (the table holds no wide characters).
std::size_t columns(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string format_step_time(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return kMissing;
  char buf[32];
  if (seconds >= 1) std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  else if (seconds >= 0.01) std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1000);
  else std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1000);
  return buf;
}

std::string format_comparison_table(const std::vector<ComparisonRow>& rows, double target_accuracy) {
  char target[48];
  std::snprintf(target, sizeof target, "to %.1f%%", target_accuracy * 100);
  std::vector<std::vector<std::string>> cells = {
      {"algorithm", "accuracy", "site acc.", "per step", target, "of it training", "sent/site", "wall time"}};
  for (const auto& r : rows) {
    // A run stopped at the target is marked: its accuracy is where it stopped, not where it would end.
    cells.push_back({r.stopped_at_target ? r.algo + " (stopped)" : r.algo, percent(r.averaged_accuracy),
                     percent(r.mean_site_accuracy),
                     r.steps_per_site > 0 ? format_step_time(r.seconds_per_step) : kMissing,
                     r.seconds_to_target ? daemon::format_duration(*r.seconds_to_target) : kMissing,
                     r.training_seconds_to_target ? daemon::format_duration(*r.training_seconds_to_target) : kMissing,
                     daemon::format_bytes(r.bytes_sent_per_site), daemon::format_duration(r.wall_seconds)});
  }
  std::vector<std::size_t> width(cells.front().size(), 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], columns(line[c]));
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - columns(line[c]), ' ');
      // The algorithm's name reads left to right; numbers line up on the right.
      if (c == 0) text += line[c] + pad;
      else text += "  " + pad + line[c];
    }
    out += text + "\n";
  }
  return out;
}

std::string comparison_json(const std::vector<ComparisonRow>& rows, const ComparisonContext& context) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : rows) {
    results.push_back({{"algo", r.algo},
                       {"sites", r.sites},
                       {"test_accuracy", optional_number(r.averaged_accuracy)},
                       {"mean_site_accuracy", optional_number(r.mean_site_accuracy)},
                       {"seconds_per_step", r.seconds_per_step},
                       {"seconds_to_target", optional_number(r.seconds_to_target)},
                       {"training_seconds_to_target", optional_number(r.training_seconds_to_target)},
                       {"bytes_sent_per_site", r.bytes_sent_per_site},
                       {"bytes_received_per_site", r.bytes_received_per_site},
                       {"steps_per_site", r.steps_per_site},
                       {"rounds_abandoned", r.rounds_abandoned},
                       {"wall_seconds", r.wall_seconds},
                       {"stopped_at_target", r.stopped_at_target}});
  }
  const auto path = [](const std::filesystem::path& p) {
    return p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.string());
  };
  const nlohmann::json object = {{"sites", context.sites},
                                 {"wan", context.wan},
                                 {"partition", context.partition},
                                 {"model", context.model},
                                 {"epochs", context.epochs},
                                 {"target_accuracy", context.target_accuracy},
                                 {"results", results},
                                 {"files",
                                  {{"results_csv", path(context.results_csv)},
                                   {"curves_csv", path(context.curves_csv)},
                                   {"plot_svg", path(context.plot_svg)}}}};
  return object.dump(2) + "\n";
}

}  // namespace meridian::cli

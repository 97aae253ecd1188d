#include "cli/accuracy_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string_view>

#include "models/model_factory.h"

namespace meridian::cli {
namespace {

// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};

constexpr double kWidth = 820, kHeight = 500;
constexpr double kLeft = 70, kRight = 170, kTop = 62, kBottom = 56;  // margins around the plot area
constexpr double kLegendGap = 16, kLegendIndent = 32;  // plot edge to legend symbols, symbols to their text

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick spacing of 1, 2 or 5 times a power of ten that gives about `ticks` intervals over `range`.
double nice_step(double range, int ticks) {
  const double raw = range / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

std::string tick_label(double v, double step) {
  char buf[32];
  if (step >= 1) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::ceil(-std::log10(step))), v);
  return buf;
}

struct Axes {
  double x_max, y_min, y_max;  // seconds; accuracy in percent
  double x(double seconds) const { return kLeft + seconds / x_max * (kWidth - kLeft - kRight); }
  double y(double percent) const {
    return kHeight - kBottom - (percent - y_min) / (y_max - y_min) * (kHeight - kTop - kBottom);
  }
};

}  // namespace

std::string render_accuracy_svg(const std::vector<CurvePoint>& points, const std::vector<ComparisonRow>& rows,
                                const AccuracyPlotLabels& labels) {
  // Axis ranges: time from 0 to the last event; accuracy zoomed to the data (rounded out to the tick
  // spacing) so that the differences between algorithms are visible, always including the target.
  double x_max = 0, lo = 100, hi = 0;
  for (const auto& p : points) {
    x_max = std::max(x_max, p.seconds);
    lo = std::min(lo, p.accuracy * 100);
    hi = std::max(hi, p.accuracy * 100);
  }
  for (const auto& r : rows) {
    if (r.averaged_accuracy) {
      x_max = std::max(x_max, r.wall_seconds);
      lo = std::min(lo, *r.averaged_accuracy * 100);
      hi = std::max(hi, *r.averaged_accuracy * 100);
    }
  }
  if (labels.target_accuracy > 0) {
    lo = std::min(lo, labels.target_accuracy * 100);
    hi = std::max(hi, labels.target_accuracy * 100);
  }
  if (hi < lo) lo = 0, hi = 100;
  if (x_max <= 0) x_max = 1;
  const double y_step = nice_step(std::max(hi - lo, 1.0) * 1.1, 6);
  Axes axes{0, std::max(0.0, std::floor(lo / y_step) * y_step), std::min(100.0, std::ceil(hi / y_step) * y_step)};
  if (axes.y_max <= axes.y_min) axes.y_max = axes.y_min + y_step;
  const double x_step = nice_step(x_max, 8);
  axes.x_max = std::ceil(x_max / x_step) * x_step;

  // The legend sits right of the plot area. A long variant name (dts:delay=4:period=32:exchange=direct)
  // widens the canvas instead of running off its edge: 8 px per character bounds DejaVu Sans at 13 px.
  std::size_t longest_label = std::string_view("one line per site").size();
  for (const auto& r : rows) longest_label = std::max(longest_label, r.algo.size());
  for (const auto& p : points) longest_label = std::max(longest_label, p.algo.size());
  const double width = std::max(kWidth, kWidth - kRight + kLegendGap + kLegendIndent + 8.0 * longest_label + 12);

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(kHeight) +
         "\" viewBox=\"0 0 " + num(width) + " " + num(kHeight) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"13\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(kLeft) + "\" y=\"24\" font-size=\"17\" font-weight=\"bold\">" + escape(labels.title) +
         "</text>\n";
  if (!labels.subtitle.empty())
    svg += "<text x=\"" + num(kLeft) + "\" y=\"44\" fill=\"#444\">" + escape(labels.subtitle) + "</text>\n";

  // Grid and ticks.
  const double left = axes.x(0), right = axes.x(axes.x_max), bottom = axes.y(axes.y_min), top = axes.y(axes.y_max);
  svg += "<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n";
  for (double v = axes.y_min; v <= axes.y_max + 1e-9; v += y_step)
    svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(axes.y(v)) + "\" x2=\"" + num(right) + "\" y2=\"" +
           num(axes.y(v)) + "\"/>\n";
  for (double v = 0; v <= axes.x_max + 1e-9; v += x_step)
    svg += "<line x1=\"" + num(axes.x(v)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(axes.x(v)) + "\" y2=\"" +
           num(bottom) + "\"/>\n";
  svg += "</g>\n<g fill=\"#333\">\n";
  for (double v = axes.y_min; v <= axes.y_max + 1e-9; v += y_step)
    svg += "<text x=\"" + num(left - 8) + "\" y=\"" + num(axes.y(v) + 4) + "\" text-anchor=\"end\">" +
           tick_label(v, y_step) + "%</text>\n";
  for (double v = 0; v <= axes.x_max + 1e-9; v += x_step)
    svg += "<text x=\"" + num(axes.x(v)) + "\" y=\"" + num(bottom + 18) + "\" text-anchor=\"middle\">" +
           tick_label(v, x_step) + "</text>\n";
  svg += "</g>\n";
  svg += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) + "\" height=\"" +
         num(bottom - top) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  svg += "<text x=\"" + num((left + right) / 2) + "\" y=\"" + num(kHeight - 14) +
         "\" text-anchor=\"middle\">wall time since the sites started (s)</text>\n";
  svg += "<text transform=\"translate(18 " + num((top + bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">test accuracy</text>\n";

  if (labels.target_accuracy > 0) {
    const double y = axes.y(labels.target_accuracy * 100);
    svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(right) + "\" y2=\"" + num(y) +
           "\" stroke=\"#666\" stroke-dasharray=\"6 4\"/>\n";
    char text[48];
    std::snprintf(text, sizeof text, "target %.1f%%", labels.target_accuracy * 100);
    // At the left end: curves start low, so the label rarely collides with them there.
    svg += "<text x=\"" + num(left + 6) + "\" y=\"" + num(y - 5) + "\" fill=\"#666\">" + text + "</text>\n";
  }

  // One colour per algorithm, in the rows' order (then any algorithm only the points name).
  std::vector<std::string> algos;
  for (const auto& r : rows) algos.push_back(r.algo);
  for (const auto& p : points)
    if (std::find(algos.begin(), algos.end(), p.algo) == algos.end()) algos.push_back(p.algo);
  const auto colour = [&](const std::string& algo) {
    const auto at = std::find(algos.begin(), algos.end(), algo) - algos.begin();
    return kPalette[static_cast<std::size_t>(at) % std::size(kPalette)];
  };

  // Curves: points are in time order, so each site's line is its points in order.
  std::map<std::pair<std::string, std::string>, std::string> lines;  // (algo, site) -> "x,y x,y ..."
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& p : points) {
    const auto key = std::make_pair(p.algo, p.site);
    if (!lines.contains(key)) order.push_back(key);
    lines[key] += num(axes.x(p.seconds)) + "," + num(axes.y(p.accuracy * 100)) + " ";
  }
  for (const auto& key : order) {
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(colour(key.first)) +
           "\" stroke-width=\"1.8\" stroke-opacity=\"0.75\" stroke-linejoin=\"round\" points=\"" + lines[key] +
           "\"><title>" + escape(key.first + " " + key.second) + "</title></polyline>\n";
  }
  for (const auto& p : points) {
    svg += "<circle cx=\"" + num(axes.x(p.seconds)) + "\" cy=\"" + num(axes.y(p.accuracy * 100)) +
           "\" r=\"2.2\" fill=\"" + colour(p.algo) + "\"/>\n";
  }
  for (const auto& r : rows) {
    if (!r.averaged_accuracy) continue;
    const double x = axes.x(r.wall_seconds), y = axes.y(*r.averaged_accuracy * 100);
    svg += "<path d=\"M" + num(x) + " " + num(y - 7) + " L" + num(x + 7) + " " + num(y) + " L" + num(x) + " " +
           num(y + 7) + " L" + num(x - 7) + " " + num(y) + " Z\" fill=\"" + colour(r.algo) +
           "\" stroke=\"white\" stroke-width=\"1.2\"><title>" + escape(r.algo) + ": averaged model</title></path>\n";
  }
  if (points.empty()) {
    svg += "<text x=\"" + num((left + right) / 2) + "\" y=\"" + num((top + bottom) / 2) +
           "\" text-anchor=\"middle\" fill=\"#888\">no evaluations</text>\n";
  }

  // Legend, right of the plot area.
  double ly = top + 8;
  const double lx = right + kLegendGap;
  for (const auto& algo : algos) {
    svg += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 24) + "\" y2=\"" + num(ly) +
           "\" stroke=\"" + colour(algo) + "\" stroke-width=\"3\"/>\n";
    svg += "<text x=\"" + num(lx + kLegendIndent) + "\" y=\"" + num(ly + 4) + "\">" + escape(algo) + "</text>\n";
    ly += 22;
  }
  ly += 8;
  svg += "<path d=\"M" + num(lx + 12) + " " + num(ly - 6) + " L" + num(lx + 18) + " " + num(ly) + " L" + num(lx + 12) +
         " " + num(ly + 6) + " L" + num(lx + 6) + " " + num(ly) + " Z\" fill=\"#555\"/>\n";
  svg += "<text x=\"" + num(lx + 32) + "\" y=\"" + num(ly + 4) + "\">averaged model</text>\n";
  svg += "<text x=\"" + num(lx + 32) + "\" y=\"" + num(ly + 20) + "\" fill=\"#555\">at the end</text>\n";
  ly += 38;
  svg += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" fill=\"#555\">one line per site</text>\n";
  svg += "</svg>\n";
  return svg;
}

std::string model_and_data(const daemon::SiteConfig& site, const std::vector<std::string>& site_train) {
  const auto file_name = [](const std::string& path) { return std::filesystem::path(path).filename().string(); };
  std::string data;
  for (const auto& path : site_train) data += (data.empty() ? "" : ", ") + file_name(path);
  if (data.empty()) {
    data = !site.train.empty()                                  ? file_name(site.train)
           : site.dataset == "csv" && !site.train_csv.empty()   ? file_name(site.train_csv)
           : site.dataset == "idx"                              ? "the IDX files in " + site.data_dir
                                                                : site.dataset;
  }
  // A model file names itself by its file name; a built-in model by its name.
  const auto& builtins = models::builtin_models();
  const bool builtin = std::find(builtins.begin(), builtins.end(), site.model) != builtins.end();
  return (builtin ? site.model : file_name(site.model)) + " on " + data;
}

}  // namespace meridian::cli

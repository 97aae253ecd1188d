#include "daemon/status/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string_view>

#include "daemon/status/human_format.h"

namespace meridian::daemon {
namespace {

// Appends text pieces in order (one buffer, no temporaries).
struct Html {
  std::string text;
  Html& operator<<(std::string_view piece) {
    text.append(piece);
    return *this;
  }
};

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string short_number(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", *v);
  return buf;
}

std::string percent(const std::optional<double>& v) {
  if (!v) return "-";
  return fixed(*v * 100, 1) + "%";
}

// Distinct colours for up to eight sites, then again from the start.
const char* colour(std::size_t i) {
  static const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return palette[i % 8];
}

// One chart: a polyline per site of the values `pick` takes from its curve, on shared axes.
void chart(Html& html, std::string_view id, std::string_view title, const StatusPage& page,
           const std::function<std::optional<double>(const CurvePoint&)>& pick, bool unit_range) {
  constexpr double kWidth = 640, kHeight = 220, kLeft = 56, kRight = 12, kTop = 12, kBottom = 28;
  double t_min = INFINITY, t_max = -INFINITY, y_max = unit_range ? 1.0 : 0.0;
  for (const auto& [site, curve] : page.curves) {
    for (const auto& p : curve) {
      const auto v = pick(p);
      if (!v || !std::isfinite(*v)) continue;
      t_min = std::min(t_min, p.seconds);
      t_max = std::max(t_max, p.seconds);
      if (!unit_range) y_max = std::max(y_max, *v);
    }
  }
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  html << "<h2>" << title << "</h2>\n<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
       << fixed(kWidth, 0) << "\" height=\"" << fixed(kHeight, 0) << "\" viewBox=\"0 0 " << fixed(kWidth, 0) << " "
       << fixed(kHeight, 0) << "\" role=\"img\" aria-label=\"" << title << "\">\n";
  html << "<rect x=\"" << fixed(x0, 0) << "\" y=\"" << fixed(y1, 0) << "\" width=\"" << fixed(x1 - x0, 0)
       << "\" height=\"" << fixed(y0 - y1, 0) << "\" fill=\"#fafafa\" stroke=\"#999\"/>\n";
  if (!(t_max >= t_min)) {
    html << "<text x=\"" << fixed((x0 + x1) / 2, 0) << "\" y=\"" << fixed((y0 + y1) / 2, 0)
         << "\" text-anchor=\"middle\" fill=\"#666\">no measurement yet</text>\n</svg>\n";
    return;
  }
  if (y_max <= 0) y_max = 1;
  const double span = std::max(t_max - t_min, 1e-9);
  html << "<text x=\"" << fixed(x0 - 4, 0) << "\" y=\"" << fixed(y1 + 10, 0)
       << "\" text-anchor=\"end\" font-size=\"11\">" << (unit_range ? "100%" : short_number(y_max)) << "</text>\n";
  html << "<text x=\"" << fixed(x0 - 4, 0) << "\" y=\"" << fixed(y0, 0) << "\" text-anchor=\"end\" font-size=\"11\">"
       << (unit_range ? "0%" : "0") << "</text>\n";
  html << "<text x=\"" << fixed(x0, 0) << "\" y=\"" << fixed(kHeight - 8, 0) << "\" font-size=\"11\">"
       << escape(format_duration(t_min)) << "</text>\n";
  html << "<text x=\"" << fixed(x1, 0) << "\" y=\"" << fixed(kHeight - 8, 0)
       << "\" text-anchor=\"end\" font-size=\"11\">" << escape(format_duration(t_max))
       << " since this site started</text>\n";
  std::size_t index = 0;
  for (const auto& [site, curve] : page.curves) {
    const char* stroke = colour(index++);
    Html points;
    std::size_t count = 0;
    for (const auto& p : curve) {
      const auto v = pick(p);
      if (!v || !std::isfinite(*v)) continue;
      const double x = x0 + (p.seconds - t_min) / span * (x1 - x0);
      const double y = y0 - std::clamp(*v / y_max, 0.0, 1.0) * (y0 - y1);
      if (count++ > 0) points << " ";
      points << fixed(x, 1) << "," << fixed(y, 1);
    }
    if (count < 2) continue;
    html << "<polyline data-site=\"" << escape(site) << "\" fill=\"none\" stroke=\"" << stroke
         << "\" stroke-width=\"2\" points=\"" << points.text << "\"/>\n";
  }
  html << "</svg>\n<p class=\"legend\">";
  index = 0;
  for (const auto& [site, curve] : page.curves)
    html << "<span style=\"color:" << colour(index++) << "\">&#9632; " << escape(site) << "</span> ";
  html << "</p>\n";
}

}  // namespace

std::string render_status_page(const StatusPage& page) {
  Html html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta http-equiv=\"refresh\" content=\"" << std::to_string(page.refresh_seconds) << "\">\n"
       << "<title>Meridian: " << escape(page.self) << "</title>\n"
       << "<style>\n"
       << "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
       << "table{border-collapse:collapse;margin-bottom:1em}\n"
       << "th,td{border:1px solid #ccc;padding:3px 9px;text-align:right}\n"
       << "th{background:#eee}td:first-child,th:first-child{text-align:left}\n"
       << "tr.self td{font-weight:bold}tr.dead td,tr.unheard td{color:#a00}\n"
       << ".legend span{margin-right:1em}\n"
       << "</style>\n</head>\n<body>\n"
       << "<h1>Meridian federation seen from " << escape(page.self) << " (" << escape(page.algorithm) << ")</h1>\n";
  if (!page.progress.empty()) html << "<p id=\"progress\">Run: " << escape(page.progress) << "</p>\n";
  if (!page.privacy.empty()) html << "<p id=\"privacy\">Privacy (DP-SGD): " << escape(page.privacy) << "</p>\n";
  if (!page.notes.empty()) {
    html << "<ul id=\"notes\">\n";
    for (const auto& note : page.notes) html << "<li>" << escape(note) << "</li>\n";
    html << "</ul>\n";
  }
  html << "<h2>Sites</h2>\n<table id=\"sites\">\n<thead><tr><th>site</th><th>state</th><th>step</th><th>epoch</th>"
       << "<th>loss</th><th>accuracy</th><th>samples/s</th><th>push-sum w</th><th>last heard</th></tr></thead>\n"
       << "<tbody>\n";
  for (const auto& r : page.sites) {
    html << "<tr data-site=\"" << escape(r.site) << "\" class=\"" << escape(r.self ? "self" : r.state) << "\"><td>"
         << escape(r.site) << (r.self ? " (this site)" : "") << "</td><td>" << escape(r.state) << "</td><td>"
         << std::to_string(r.step) << "</td><td>" << std::to_string(r.epoch) << "</td><td>"
         << short_number(r.train_loss) << "</td><td>" << percent(r.test_accuracy) << "</td><td>"
         << (r.samples_per_second ? fixed(*r.samples_per_second, 0) : "-") << "</td><td>"
         << short_number(r.push_sum_weight) << "</td><td>";
    if (r.self) html << "-";
    else if (r.last_heard_seconds) html << escape(format_duration(*r.last_heard_seconds)) << " ago";
    else html << "never";
    html << "</td></tr>\n";
  }
  html << "</tbody>\n</table>\n"
       << "<h2>Links from " << escape(page.self) << "</h2>\n<table id=\"links\">\n"
       << "<thead><tr><th>peer</th><th>state</th><th>address</th><th>RTT</th><th>sent</th><th>received</th></tr>"
       << "</thead>\n<tbody>\n";
  for (const auto& p : page.links) {
    if (p.name == page.self) continue;
    html << "<tr data-peer=\"" << escape(p.name) << "\"><td>" << escape(p.name) << "</td><td>" << escape(p.state)
         << "</td><td>" << escape(p.address) << "</td><td>"
         << (p.rtt_seconds ? fixed(*p.rtt_seconds * 1000, 1) + " ms" : "-") << "</td><td>"
         << escape(format_bytes(static_cast<double>(p.bytes_sent))) << "</td><td>"
         << escape(format_bytes(static_cast<double>(p.bytes_received))) << "</td></tr>\n";
  }
  html << "</tbody>\n</table>\n";
  chart(
      html, "loss-chart", "Training loss", page, [](const CurvePoint& p) { return p.train_loss; }, false);
  chart(
      html, "accuracy-chart", "Test accuracy", page, [](const CurvePoint& p) { return p.test_accuracy; }, true);
  html << "<p>Metrics for Prometheus: <a href=\"/metrics\">/metrics</a></p>\n</body>\n</html>\n";
  return std::move(html.text);
}

}  // namespace meridian::daemon

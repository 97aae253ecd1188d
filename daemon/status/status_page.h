// The HTML status page the metrics server shows at / and /status: every site of the federation
// (daemon/federation/federation_view.h), this site's links (RTT, traffic) and the sites' loss and accuracy
// curves. One self-contained document: inline CSS and SVG, no script, no external asset; it reloads
// itself every few seconds (a meta refresh), so any browser that can reach the port can watch a run.
//
// Element ids for tools and tests: p#progress (this site's run: rounds done of the total, percent,
// time left; absent before the rounds are agreed), ul#notes (one li per note: what this site waits
// for and why; absent when none), table#sites (one tr[data-site] per site), table#links (one
// tr[data-peer] per peer), svg#loss-chart and svg#accuracy-chart (one polyline[data-site] per site
// with at least two points).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/control/control_protocol.h"
#include "daemon/federation/federation_view.h"

namespace meridian::daemon {

struct StatusPage {
  std::string self;  // the site that serves the page
  std::string algorithm;
  std::string progress;            // daemon/status/run_progress.h format_run_progress; empty before it is known
  std::vector<std::string> notes;  // StatusReport::notes
  std::string privacy;  // DP-SGD's spent budget, "epsilon 1.2 of 3 spent (delta 1e-05, 800 steps)"; empty without DP
  std::vector<SiteRow> sites;
  std::vector<PeerReport> links;
  std::map<std::string, std::vector<CurvePoint>> curves;
  int refresh_seconds = 2;
};

// The page as an HTML document (UTF-8). Never throws for any content: names and texts are escaped.
std::string render_status_page(const StatusPage& page);

}  // namespace meridian::daemon

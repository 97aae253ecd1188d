// The federation-wide view through real `meridian start` processes on 127.0.0.1: every site shows
// every site (`meridian status --federation`, its --json, per-site gauges on /metrics, and the HTML
// status page, loaded in a real headless Chromium), and a site that leaves drops out of the others'.
#include <catch2/catch.hpp>

#include <png.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/control/control_client.h"
#include "error/exit_code.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::ControlClient;
using meridian::daemon::SiteRow;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Pixels of a PNG file within `tolerance` of `rgb` in every channel, or -1 when it does not decode.
long pixels_near(const fs::path& file, unsigned rgb, int tolerance) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, file.c_str())) return -1;
  image.format = PNG_FORMAT_RGB;
  std::vector<unsigned char> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) return -1;
  const int want[3] = {static_cast<int>(rgb >> 16), static_cast<int>((rgb >> 8) & 255), static_cast<int>(rgb & 255)};
  long count = 0;
  for (std::size_t i = 0; i + 2 < pixels.size(); i += 3) {
    bool near = true;
    for (int c = 0; c < 3; ++c) near = near && std::abs(pixels[i + c] - want[c]) <= tolerance;
    count += near;
  }
  return count;
}

std::string socket_of(const SiteProcess& site) { return (site.run_dir() / "control.sock").string(); }

std::vector<SiteRow> federation_of(const SiteProcess& site) {
  try {
    return ControlClient(socket_of(site)).federation();
  } catch (const std::exception&) {
    return {};
  }
}

// Every one of `names` has a row with a step, a loss, an accuracy and a rate.
bool all_measured(const std::vector<SiteRow>& rows, const std::vector<std::string>& names) {
  if (rows.size() != names.size()) return false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (r.site != names[i] || r.step == 0 || !r.train_loss || !r.test_accuracy || !r.samples_per_second ||
        !r.last_heard_seconds)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("every site shows the whole federation: status --federation, per-site gauges and the status page",
          "[daemon][federation][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path());
  const std::vector<std::string> names{"alpha", "beta", "gamma"};
  std::vector<std::unique_ptr<SiteProcess>> sites;
  std::string join;
  for (int i = 0; i < 3; ++i) {
    auto args = meridian::tests::training_site_args(names[i], i, 3, table);
    if (i > 0) args.join(join);
    sites.push_back(std::make_unique<SiteProcess>(dir.path() / names[i], args));
    if (i == 0) join = sites[0]->endpoint();
  }
  auto& alpha = *sites[0];
  auto& gamma = *sites[2];
  INFO("alpha:\n" << alpha.log() << "\ngamma:\n" << gamma.log());
  // Each site's rows: itself first, then the others by name; every value measured once training runs
  // (samples/s comes with the first progress line).
  REQUIRE(eventually_from_process([&] { return all_measured(federation_of(gamma), {"gamma", "alpha", "beta"}) || gamma.exited(); }));
  REQUIRE(eventually_from_process([&] { return all_measured(federation_of(alpha), {"alpha", "beta", "gamma"}) || alpha.exited(); }));
  const auto rows = federation_of(alpha);
  CHECK(rows[0].self);
  CHECK(*rows[0].last_heard_seconds == 0.0);
  CHECK_FALSE(rows[1].self);
  CHECK(rows[1].state == "training");

  // The command, as an operator runs it.
  const auto table_out = meridian::tests::run_meridian("status --federation --socket " + socket_of(gamma));
  INFO(table_out.output);
  CHECK(table_out.exit_code == 0);
  CHECK(contains(table_out.output, "SITE "));
  CHECK(contains(table_out.output, "LAST HEARD"));
  CHECK(contains(table_out.output, "(this site)"));
  for (const auto& n : names) CHECK(contains(table_out.output, "\n" + n + " "));
  const auto json_out = meridian::tests::run_meridian("status --federation --json --socket " + socket_of(gamma));
  REQUIRE(json_out.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json_out.output);
  REQUIRE(parsed.size() == 3);
  CHECK(parsed[0]["site"] == "gamma");
  CHECK(parsed[0]["self"] == true);
  CHECK(parsed[1]["train_loss"].is_number());

  // Progress: the run's rounds, the share done and the time left, with an epoch that matches the step.
  const auto own = meridian::tests::run_meridian("status --json --socket " + socket_of(gamma));
  REQUIRE(own.exit_code == 0);
  const auto status = nlohmann::json::parse(own.output);
  INFO(own.output);
  REQUIRE(status.contains("total_steps"));
  const auto step = status["step"].get<std::uint64_t>();
  const auto total = status["total_steps"].get<std::uint64_t>();
  CHECK(total > 0);
  CHECK(step <= total);
  CHECK(status["percent_done"].get<double>() == Approx(100.0 * static_cast<double>(step) / static_cast<double>(total)));
  CHECK(status["epoch"].get<std::uint64_t>() <= step);  // whole epochs of those rounds, never a stale count
  const auto text = meridian::tests::run_meridian("status --socket " + socket_of(gamma));
  INFO(text.output);
  CHECK(contains(text.output, " of " + std::to_string(total) + " rounds ("));

  // These sites run without CURVE: there is no roster to list or change, and the command says so.
  const auto roster = meridian::tests::run_meridian("roster list --socket " + socket_of(gamma));
  CHECK(roster.exit_code == meridian::error::kExitUser);
  CHECK(contains(roster.output, "site 'gamma' runs without CURVE (--insecure): it has no roster"));

  // Per-site gauges on /metrics, one series per site.
  const int port = meridian::tests::metrics_port(alpha.log());
  REQUIRE(port != 0);
  const auto metrics = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  // Exposition values are the shortest text of the number (400000 is "4e+05").
  const auto total_at = metrics.find("\nmeridian_total_steps ");
  REQUIRE(total_at != std::string::npos);
  CHECK(std::stod(metrics.substr(total_at + 22)) == static_cast<double>(total));
  CHECK(contains(metrics, "\nmeridian_progress_ratio "));
  REQUIRE(eventually_from_process([&] {
    return contains(meridian::tests::http_body(meridian::tests::http_get(port, "/metrics")), "\nmeridian_eta_seconds ");
  }));
  for (const auto& n : names) {
    CHECK(contains(metrics, "meridian_federation_step{site=\"" + n + "\"} "));
    CHECK(contains(metrics, "meridian_federation_train_loss{site=\"" + n + "\"} "));
    CHECK(contains(metrics, "meridian_federation_test_accuracy{site=\"" + n + "\"} "));
    CHECK(contains(metrics, "meridian_federation_last_heard_seconds{site=\"" + n + "\"} "));
  }

  // The status page over plain HTTP, then rendered by a real browser.
  const auto response = meridian::tests::http_get(port, "/status");
  REQUIRE(response.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(contains(response, "Content-Type: text/html"));
  CHECK(contains(response, "<p id=\"progress\">Run: "));
  // The page's curves need two points per site: summaries come once a second.
  REQUIRE(eventually_from_process([&] {
    const auto page = meridian::tests::http_body(meridian::tests::http_get(port, "/"));
    for (const auto& n : names)
      if (!contains(page, "<polyline data-site=\"" + n + "\"")) return false;
    return true;
  }));
  if (!fs::exists("/usr/bin/chromium")) {
    WARN(
        "SKIPPED: the browser check: /usr/bin/chromium is not installed (Debian package chromium, "
        "scripts/install-deps test)");
  } else {
    // As root Chromium runs only without its sandbox; the background services would try the network.
    const std::string browser =
        "timeout 300 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync --user-data-dir=" +
        (dir.path() / "chromium").string() + " ";
    const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/status";
    const auto dom =
        meridian::tests::run_shell(browser + "--dump-dom " + url + " 2> " + (dir.path() / "chromium.log").string());
    INFO("chromium: " << meridian::tests::file_contents(dir.path() / "chromium.log"));
    REQUIRE(dom.exit_code == 0);
    CHECK(contains(dom.output, "<table id=\"sites\">"));
    CHECK(contains(dom.output, "<p id=\"progress\">Run: "));
    CHECK(contains(dom.output, " of " + std::to_string(total) + " rounds ("));
    CHECK(contains(dom.output, "alpha (this site)"));
    for (const auto& n : names) {
      CHECK(contains(dom.output, "<tr data-site=\"" + n + "\""));
      CHECK(contains(dom.output, "<polyline data-site=\"" + n + "\""));
    }
    CHECK(contains(dom.output, "<tr data-peer=\"beta\">"));
    CHECK(contains(dom.output, "<svg id=\"accuracy-chart\""));
    // A screenshot: the page paints (a PNG of the window's size).
    const auto png = dir.path() / "status.png";
    const auto shot = meridian::tests::run_shell(browser + "--window-size=900,1300 --screenshot=" + png.string() + " " +
                                                 url + " 2>> " + (dir.path() / "chromium.log").string());
    CHECK(shot.exit_code == 0);
    REQUIRE(fs::exists(png));
    const auto bytes = meridian::tests::file_contents(png);
    REQUIRE(bytes.size() > 24);
    CHECK(bytes.substr(1, 3) == "PNG");
    // IHDR: width and height, big-endian, at bytes 16..23.
    const auto be32 = [&](std::size_t at) {
      return (static_cast<unsigned char>(bytes[at]) << 24) | (static_cast<unsigned char>(bytes[at + 1]) << 16) |
             (static_cast<unsigned char>(bytes[at + 2]) << 8) | static_cast<unsigned char>(bytes[at + 3]);
    };
    CHECK(be32(16) == 900);
    CHECK(be32(20) == 1300);
    // The curves paint: the sites' colours (daemon/status/status_page.cc: blue, red, green for the first three
    // sites by name) cover far more pixels than the three legend marks alone, as 2-pixel-wide lines
    // across both charts do (sites' curves may lie on top of each other, so only the sum counts).
    long curve_pixels = 0;
    for (const unsigned colour : {0x1f77b4u, 0xd62728u, 0x2ca02cu}) {
      const long n = pixels_near(png, colour, 24);
      CHECK(n > 0);
      curve_pixels += n;
    }
    CHECK(curve_pixels > 1000);
    // The sites' table paints: its header row's grey background.
    CHECK(pixels_near(png, 0xeeeeeeu, 2) > 2000);
  }

  // beta leaves: it leaves the others' federation view and its series go from /metrics.
  CHECK(ControlClient(socket_of(*sites[1])).leave().accepted);
  CHECK(sites[1]->wait_exit() == 0);
  REQUIRE(eventually_from_process([&] {
    const auto now = federation_of(alpha);
    return now.size() == 2 && now[0].site == "alpha" && now[1].site == "gamma";
  }));
  CHECK(eventually_from_process([&] {
    return !contains(meridian::tests::http_body(meridian::tests::http_get(port, "/metrics")),
                     "meridian_federation_step{site=\"beta\"}");
  }));
  alpha.signal(SIGINT);
  gamma.signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
  CHECK(gamma.wait_exit() == 0);
}

// `meridian simulate` as a user runs it: a real process that starts real site processes. The process
// handling (start, follow progress, stop everything on a failure or Ctrl-C) runs against a stand-in
// site (tests/cli/fake_site.sh) so it is tested without training; one small run uses the real
// `meridian start`.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "error/exit_code.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/eventually.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = meridian::tests::CommandOutput;
using meridian::tests::file_contents;

Result run(const std::string& args) { return meridian::tests::run_meridian(args); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0; }

const std::string kFakeSite = std::string(meridian::tests::source_dir()) + "/tests/cli/fake_site.sh";

// `meridian ARGS --site-program fake_site.sh` with the fake sites in FAKE_SITE_MODE `mode`.
Result run_with_fake_sites(const char* mode, const std::string& args) {
  setenv("FAKE_SITE_MODE", mode, 1);
  Result r = run(args + " --site-program " + kFakeSite);
  unsetenv("FAKE_SITE_MODE");
  return r;
}

}  // namespace

TEST_CASE("simulate rejects bad arguments with messages that name the option", "[cli][simulate][process]") {
  const Result r =
      run("simulate --sites 0 --algo sgp,fedavg --wan world5 --partition dirichlet:-1 --target-accuracy 80"
          " --heartbeat-timeout 0.2");
  CHECK(r.exit_code == meridian::error::kExitUser);
  CHECK(r.output.find("--sites: 0 is not in 1..64") != std::string::npos);
  CHECK(r.output.find("'fedavg' is not one of") != std::string::npos);
  CHECK(r.output.find("world5") != std::string::npos);
  CHECK(r.output.find("--partition") != std::string::npos);
  CHECK(r.output.find("--target-accuracy: 80 is not a fraction") != std::string::npos);
  CHECK(r.output.find("--heartbeat-timeout: 0.2 s must exceed --heartbeat-interval 0.5 s") != std::string::npos);
  const Result help = run("simulate --help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("Example") != std::string::npos);
  CHECK(help.output.find("--heartbeat-timeout") != std::string::npos);
  CHECK(help.output.find("--heartbeat-interval") != std::string::npos);
  CHECK(help.output.find("--site-program") == std::string::npos);  // a test seam, not for users
}

TEST_CASE("simulate collects every site's progress and result into the table, CSV files and plot",
          "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  const Result r =
      run("simulate --sites 3 --algo local,sgp --wan world4 --target-accuracy 0.75"
          " --heartbeat-interval 1 --heartbeat-timeout 15 --out " +
          dir.path().string() + " --site-program " + kFakeSite);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Fake accuracies (fake_site.sh): site i reports 0.6i, 0.7i, 0.8i; its own final model 0.8i.
  const auto table = r.output.substr(r.output.find("\nalgorithm ") + 1);
  const auto rows = lines_of(table);
  REQUIRE(rows.size() >= 3);
  CHECK(rows[1].starts_with("local"));
  CHECK(rows[2].starts_with("sgp"));
  CHECK(rows[1].find("81.0%") != std::string::npos);  // mean of 0.80, 0.81, 0.82
  CHECK(rows[1].find("100 ms") != std::string::npos);
  CHECK(rows[1].find("3.0 kB") != std::string::npos);
  CHECK(r.output.find("plot     " + (dir.path() / "accuracy.svg").string()) != std::string::npos);

  const auto results = lines_of(file_contents(dir.path() / "results.csv"));
  REQUIRE(results.size() == 3);
  CHECK(results[1].starts_with("local,3,,0.81,0.1,0.75,"));
  CHECK(results[2].starts_with("sgp,3,,0.81,0.1,0.75,"));
  const auto curves = lines_of(file_contents(dir.path() / "curves.csv"));
  CHECK(curves.size() == 1 + 2 * 3 * 3);  // header, 2 algorithms x 3 sites x 3 evaluations
  const std::string svg = file_contents(dir.path() / "accuracy.svg");
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("<polyline") != std::string::npos);

  // Each site got its own directory, configuration (world4 regions in site order) and log; keys and a
  // roster were made because the run is secure by default.
  for (const char* algo : {"local", "sgp"}) {
    for (int i = 0; i < 3; ++i) {
      const fs::path site = dir.path() / algo / ("site-" + std::to_string(i));
      CHECK(fs::exists(site / "log.txt"));
      const std::string config = file_contents(site / "site.toml");
      CHECK(config.find("algo = \"" + std::string(algo) + "\"") != std::string::npos);
      CHECK(config.find("site-index = " + std::to_string(i)) != std::string::npos);
      CHECK(config.find(std::string("region = \"") + (i == 0   ? "oregon"
                                                      : i == 1 ? "ohio"
                                                               : "london")) != std::string::npos);
      CHECK(config.find("metrics-address = \"off\"") != std::string::npos);
      CHECK(config.find("heartbeat-interval = 1.0\n") != std::string::npos);
      CHECK(config.find("heartbeat-timeout = 15.0\n") != std::string::npos);
    }
  }
  CHECK(fs::exists(dir.path() / "keys" / "site-2" / "secret.key"));
  CHECK(file_contents(dir.path() / "roster.txt").find("site-2") != std::string::npos);

  const Result json = run("simulate --sites 2 --algo dts --insecure --json --out " + dir.path().string() +
                          " --site-program " + kFakeSite + " 2>/dev/null");
  REQUIRE(json.exit_code == 0);
  CHECK(json.output.find("\"algo\": \"dts\"") != std::string::npos);
  CHECK(json.output.find("\"results_csv\": \"" + (dir.path() / "results.csv").string()) != std::string::npos);
  CHECK(file_contents(dir.path() / "dts" / "site-0" / "site.toml").find("insecure = true") != std::string::npos);
  // dts without a delay or period: its default shape reaches the sites (daemon::apply_algorithm_defaults).
  CHECK(file_contents(dir.path() / "dts" / "site-0" / "site.toml").find("\ndelay = 2\n") != std::string::npos);
  CHECK(file_contents(dir.path() / "dts" / "site-0" / "site.toml").find("\nperiod = 16\n") != std::string::npos);
}

TEST_CASE("simulate reads diloco's old --period and --delay as --inner-steps and --overlap, warning once each",
          "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  const Result r = run("simulate --sites 2 --algo diloco,diloco-gossip --insecure --period 64 --delay 4 --out " +
                       dir.path().string() + " --site-program " + kFakeSite + " 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (auto at = r.output.find(text); at != std::string::npos; at = r.output.find(text, at + 1)) ++n;
    return n;
  };
  CHECK(count("warning: --period is deprecated for diloco and diloco-gossip") == 1);
  CHECK(count("warning: --delay is deprecated for diloco and diloco-gossip") == 1);
  CHECK(count("use --inner-steps") == 1);
  CHECK(count("use --overlap") == 1);
  for (const char* algo : {"diloco", "diloco-gossip"}) {
    const std::string config = file_contents(dir.path() / algo / "site-0" / "site.toml");
    INFO(config);
    CHECK(config.find("\ninner-steps = 64\n") != std::string::npos);
    CHECK(config.find("\noverlap = 4\n") != std::string::npos);
    CHECK(config.find("\nperiod = 1\n") != std::string::npos);  // at its default: the sites see no old spelling
  }
  // With the new spellings, nothing to warn about.
  meridian::tests::TempDir fresh;
  const Result quiet = run("simulate --sites 2 --algo diloco:inner-steps=64:overlap=4 --insecure --out " +
                           fresh.path().string() + " --site-program " + kFakeSite + " 2>&1");
  INFO(quiet.output);
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.output.find("deprecated") == std::string::npos);
}

TEST_CASE("simulate passes the DP-SGD options to every site as start takes them, and checks them as start does",
          "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  const Result r =
      run("simulate --sites 2 --algo allreduce --insecure --dp-epsilon 3 --dp-delta 1e-6 --dp-clip 1.5"
          " --out " +
          dir.path().string() + " --site-program " + kFakeSite);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (int i = 0; i < 2; ++i) {
    const std::string config = file_contents(dir.path() / "allreduce" / ("site-" + std::to_string(i)) / "site.toml");
    INFO(config);
    CHECK(config.find("\ndp-epsilon = 3.0\n") != std::string::npos);
    CHECK(config.find("\ndp-clip = 1.5\n") != std::string::npos);
    CHECK(config.find("\ndp-delta = 1e-06\n") != std::string::npos);
  }
  const Result refused = run("simulate --sites 2 --algo allreduce --insecure --dp-epsilon 3 --out " +
                             dir.path().string() + " --site-program " + kFakeSite + " 2>&1");
  CHECK(refused.exit_code != 0);
  CHECK(refused.output.find("dp-clip") != std::string::npos);
}

TEST_CASE("simulate stops every site when one fails and shows that site's log", "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  const Result failed =
      run_with_fake_sites("fail", "simulate --sites 3 --algo sgp --insecure --out " + dir.path().string());
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK(failed.output.find("sgp: site-1 exited with status 3") != std::string::npos);
  CHECK(failed.output.find("cannot read the dataset (on purpose)") != std::string::npos);
  for (int i : {0, 2}) {
    const fs::path site = dir.path() / "sgp" / ("site-" + std::to_string(i));
    const pid_t pid = std::stoi(file_contents(site / "pid"));
    CHECK_FALSE(process_alive(pid));
    CHECK(file_contents(site / "log.txt").find("stopping") != std::string::npos);  // SIGTERM first
  }
}

TEST_CASE("--stop-at-target stops the sites once every one has reached the target and reports the stop",
          "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  // The fake sites never end on their own (fake_site.sh, mode target): only the stop ends them.
  const Result r = run_with_fake_sites("target",
                                       "simulate --sites 3 --algo sgp --insecure --json --target-accuracy 0.75 "
                                       "--stop-at-target --timeout 120 --out " +
                                           dir.path().string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("sgp: every site reached 75.0%; stopping 3 site(s)") != std::string::npos);
  CHECK(r.output.find("\"stopped_at_target\": true") != std::string::npos);
  CHECK(r.output.find("\"mean_site_accuracy\": 0.81") != std::string::npos);  // their results, written at the stop
  for (int i = 0; i < 3; ++i) {
    const fs::path site = dir.path() / "sgp" / ("site-" + std::to_string(i));
    CHECK(file_contents(site / "log.txt").find("stopping") != std::string::npos);  // SIGTERM: a graceful stop
    CHECK_FALSE(process_alive(std::stoi(file_contents(site / "pid"))));
  }
  CHECK(lines_of(file_contents(dir.path() / "results.csv"))[1].ends_with(",1"));

  // Below the target the run is not stopped: a site that never reaches it keeps its algorithm running.
  const Result below = run_with_fake_sites("target",
                                           "simulate --sites 2 --algo sgp --insecure --target-accuracy 0.9 "
                                           "--stop-at-target --timeout 3 --out " +
                                               dir.path().string());
  INFO(below.output);
  CHECK(below.exit_code == 1);
  CHECK(below.output.find("still running after --timeout") != std::string::npos);
}

TEST_CASE("Ctrl-C stops simulate and every site it started", "[cli][simulate][process]") {
  meridian::tests::TempDir dir;
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  meridian::tests::ChildProcess simulate(
      {"env", "FAKE_SITE_MODE=hang", meridian::tests::meridian_binary(), "simulate", "--sites", "2", "--algo", "sgp",
       "--insecure", "--out", dir.path().string(), "--site-program", kFakeSite},
      {.out = null, .err = null});
  ::close(null);
  // Wait until both sites are up (they write their pid), then interrupt as a terminal would.
  std::vector<pid_t> sites;
  meridian::tests::eventually(
      [&] {
        sites.clear();
        for (int i = 0; i < 2; ++i) {
          const std::string pid = file_contents(dir.path() / "sgp" / ("site-" + std::to_string(i)) / "pid");
          if (!pid.empty()) sites.push_back(std::stoi(pid));
        }
        return sites.size() == 2;
      },
      meridian::tests::kFromProcess);
  REQUIRE(sites.size() == 2);
  simulate.signal(SIGINT);
  CHECK(simulate.wait() == 130);
  for (pid_t pid : sites) CHECK_FALSE(process_alive(pid));
}

TEST_CASE("simulate runs real sites end to end: local and allreduce on Fashion-MNIST",
          "[cli][simulate][slow][process]") {
  const fs::path data = meridian::tests::fashion_mnist_dir();
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  meridian::tests::TempDir dir;
  // Logistic regression, a tenth of an epoch (46 steps of 64 per site): seconds, not minutes. Secure
  // (the default), with a small emulated latency so the WAN path is on.
  const Result r =
      run("simulate --sites 2 --algo local,allreduce --model logreg --epochs 0.1 --lr 0.1 "
          "--eval-every 15 --target-accuracy 0.5 --wan latency=2ms --timeout 120 --out " +
          dir.path().string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto table = r.output.substr(r.output.find("\nalgorithm ") + 1);
  const auto rows = lines_of(table);
  REQUIRE(rows.size() >= 3);
  CHECK(rows[1].starts_with("local"));
  CHECK(rows[2].starts_with("allreduce"));

  const auto results = lines_of(file_contents(dir.path() / "results.csv"));
  REQUIRE(results.size() == 3);
  const auto fields = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream s(line);
    for (std::string f; std::getline(s, f, ',');) out.push_back(f);
    return out;
  };
  for (int i : {1, 2}) {
    const auto f = fields(results[i]);
    REQUIRE(f.size() >= 12);
    INFO(results[i]);
    // After 46 steps logistic regression is far above chance (10%) on the averaged and the site models.
    REQUIRE_FALSE(f[2].empty());
    CHECK(std::stod(f[2]) > 0.5);
    CHECK(std::stod(f[3]) > 0.5);
    CHECK(std::stod(f[9]) > 0);  // steps per site
  }
  // allreduce keeps identical replicas: the average of the final models is each site's model.
  const auto allreduce = fields(results[2]);
  CHECK(allreduce[2] == allreduce[3]);
  // local never talks to the other site over the mixer; allreduce does.
  CHECK(std::stod(allreduce[7]) > std::stod(fields(results[1])[7]));

  const auto curves = lines_of(file_contents(dir.path() / "curves.csv"));
  CHECK(std::count_if(curves.begin(), curves.end(),
                      [](const std::string& l) { return l.find(",local,") != std::string::npos; }) >= 2);
  CHECK(std::count_if(curves.begin(), curves.end(),
                      [](const std::string& l) { return l.find(",allreduce,") != std::string::npos; }) >= 2);
  const std::string svg = file_contents(dir.path() / "accuracy.svg");
  CHECK(svg.find("<polyline") != std::string::npos);
  CHECK(svg.find("averaged model</title>") != std::string::npos);
  for (const char* algo : {"local", "allreduce"}) {
    CHECK(fs::exists(dir.path() / algo / "site-1" / "result.json"));
    CHECK(fs::exists(dir.path() / algo / "site-1" / "log.txt"));
  }
}

TEST_CASE("simulate gives each site its own data with --site-train, and a site may hold only some classes",
          "[cli][simulate][data][process]") {
  meridian::tests::TempDir dir;
  auto table = [&](const std::string& name, int rows, int offset, bool both_classes) {
    const fs::path file = dir.path() / name;
    std::ofstream out(file);
    out << "age,glucose,diagnosis\n";
    for (int i = 0; i < rows; ++i) {
      const bool malignant = !both_classes || i % 2 == 0;
      out << offset + (i * 7) % 23 << ',' << (malignant ? 150 : 90) + (i * 5) % 11 << ','
          << (malignant ? "malignant" : "benign") << '\n';
    }
    return file.string();
  };
  const auto ohio = table("ohio.csv", 48, 30, true), utah = table("utah.csv", 32, 60, false),
             test = table("test.csv", 40, 45, true);
  const std::string common =
      " --sites 2 --algo allreduce --insecure --model mlp --widths 8 --epochs 2 --batch 8 "
      "--classes benign,malignant --label-column diagnosis --test " +
      test + " --eval-every 4 --timeout 120 --out " + (dir.path() / "out").string();
  const Result r = run("simulate --site-train " + ohio + " --site-train " + utah + common);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto log0 = file_contents(dir.path() / "out" / "allreduce" / "site-0" / "log.txt");
  const auto log1 = file_contents(dir.path() / "out" / "allreduce" / "site-1" / "log.txt");
  INFO(log0 << "\n" << log1);
  CHECK(log0.find("classes in this site's part: benign 24, malignant 24") != std::string::npos);
  CHECK(log1.find("classes in this site's part: benign 0, malignant 32") != std::string::npos);
  CHECK(log0.find("input scaling agreed over 2 sites (80 training rows)") != std::string::npos);

  const Result wrong = run("simulate --site-train " + ohio + common);
  CHECK(wrong.exit_code != 0);
  CHECK(wrong.output.find("--site-train: 1 path for 2 sites (give one per site, in site order)") != std::string::npos);
}

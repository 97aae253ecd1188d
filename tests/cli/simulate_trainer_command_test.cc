// `meridian simulate --trainer-command`: the sites run attached and the user's own PyTorch script
// trains each one (real processes: `meridian start --trainer attached` and Debian's python3-torch on
// the CPU), and the comparison table takes each site's accuracy from what its trainer reported.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "error/exit_code.h"
#include "tests/support/build_paths.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using meridian::tests::file_contents;

const std::string kPython = "/usr/bin/python3";
const std::string kExample = std::string(meridian::tests::source_dir()) + "/examples/pytorch/fashion_mnist.py";

bool have_torch() { return std::system((kPython + " -c 'import numpy, torch' >/dev/null 2>&1").c_str()) == 0; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string f; std::getline(s, f, ',');) out.push_back(f);
  return out;
}

// The number after "key": in the example's JSON line; -1 when it is not there.
double json_number(const std::string& output, const std::string& key) {
  const auto at = output.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stod(output.substr(at + key.size() + 4));
}

}  // namespace

TEST_CASE("simulate runs every site with the user's own PyTorch script and compares the algorithms",
          "[cli][simulate][attached][process]") {
  if (!have_torch()) {
    WARN("SKIPPED: needs /usr/bin/python3 with numpy and torch");
    return;
  }
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  meridian::tests::TempDir dir;
  // The example's MLP on the first 2000 rows, each site on its half (the example reads its part from
  // MERIDIAN_SITE_INDEX and MERIDIAN_SITE_COUNT): 2 epochs of 1000 rows in batches of 64, 31 steps,
  // with an evaluation every 10 steps and at the end. Secure (the default), over a small emulated
  // latency.
  const std::string command = kPython + " " + kExample + " --rows 2000 --test-rows 500 --epochs 2 --eval-every 10";
  const auto r = meridian::tests::run_meridian(
      "simulate --sites 2 --algo allreduce,sgp --wan latency=2ms "
      "--target-accuracy 0.3 --timeout 300 --trainer-command '" +
      command + "' --out " + dir.path().string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "each trained by `" + command + "`"));
  const auto table = r.output.substr(r.output.find("\nalgorithm ") + 1);
  const auto rows = lines_of(table);
  REQUIRE(rows.size() >= 3);
  CHECK(rows[1].starts_with("allreduce"));
  CHECK(rows[2].starts_with("sgp"));
  CHECK(contains(r.output, "--trainer-command: the model is the command's"));

  for (const char* algo : {"allreduce", "sgp"}) {
    for (const char* site : {"site-0", "site-1"}) {
      const fs::path run = dir.path() / algo / site;
      const std::string trainer = file_contents(run / "trainer.txt");
      INFO(algo << " " << site << " trainer:\n" << trainer << "\nsite:\n" << file_contents(run / "log.txt"));
      // Each trainer attached to its own site and ran the federation's 31 steps.
      CHECK(json_number(trainer, "steps") == 31);
      CHECK(contains(file_contents(run / "log.txt"), "finished 31 steps of the attached trainer"));
      // Its evaluations at steps 10, 20 and 30 and at the end, in progress.jsonl's format.
      CHECK(lines_of(file_contents(run / "trainer-progress.jsonl")).size() == 4);
    }
  }
  // allreduce keeps the replicas identical: both trainers end with the same model and accuracy.
  const auto accuracy = [&](const char* algo, const char* site) {
    return json_number(file_contents(dir.path() / algo / site / "trainer.txt"), "test_accuracy");
  };
  CHECK(accuracy("allreduce", "site-0") == accuracy("allreduce", "site-1"));

  const auto results = lines_of(file_contents(dir.path() / "results.csv"));
  REQUIRE(results.size() == 3);
  for (int i : {1, 2}) {
    const auto f = csv_fields(results[i]);
    INFO(results[i]);
    REQUIRE(f.size() >= 13);
    // No averaged model (the model is the script's); the sites' own accuracy is what the trainers
    // reported, far above chance (10%) after 31 steps, and the times to the 30% target come from
    // their reports (from the launch, and from the first step).
    CHECK(f[2].empty());
    REQUIRE_FALSE(f[3].empty());
    CHECK(std::stod(f[3]) > 0.3);
    CHECK_FALSE(f[6].empty());
    CHECK_FALSE(f[12].empty());
    CHECK(std::stod(f[7]) > 0);    // bytes sent per site: the sites mixed
    CHECK(std::stod(f[9]) == 31);  // steps per site
  }
  CHECK(std::stod(csv_fields(results[1])[3]) == Approx(accuracy("allreduce", "site-0")).margin(1e-4));
  // The trainers' evaluations make the curves: four points per site and algorithm.
  const auto curves = lines_of(file_contents(dir.path() / "curves.csv"));
  for (const char* algo : {",allreduce,", ",sgp,"})
    CHECK(std::count_if(curves.begin(), curves.end(), [&](const std::string& l) { return contains(l, algo); }) == 8);
}

TEST_CASE("simulate stops every site when the trainer command fails, shows its output, and refuses a bad command",
          "[cli][simulate][attached][process]") {
  meridian::tests::TempDir dir;
  const auto r = meridian::tests::run_meridian(
      "simulate --sites 2 --algo local --timeout 120 --trainer-command 'echo no data here; exit 3' --out " +
      dir.path().string());
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "meridian simulate: local: the trainer of site-"));
  CHECK(contains(r.output, " (--trainer-command) exited with status 3"));
  CHECK(contains(r.output, "trainer.txt:\nno data here"));

  const auto empty = meridian::tests::run_meridian("simulate --trainer-command ' ' --out " + dir.path().string());
  CHECK(empty.exit_code == meridian::error::kExitUser);
  CHECK(contains(empty.output, "--trainer-command: empty (e.g. --trainer-command 'python3 train.py')"));
  const auto own_data = meridian::tests::run_meridian(
      "simulate --sites 2 --trainer-command 'python3 t.py' "
      "--site-train a.csv --site-train b.csv --out " +
      dir.path().string());
  CHECK(own_data.exit_code == meridian::error::kExitUser);
  CHECK(contains(own_data.output, "--site-train: the sites' trainer is --trainer-command, which reads its own data"));

  const auto help = meridian::tests::run_meridian("simulate --help");
  CHECK(help.exit_code == 0);
  CHECK(contains(help.output, "--trainer-command"));
  CHECK(contains(help.output, "MERIDIAN_SITE_INDEX"));
}

// One input scaling for the federation, through real `meridian start` processes on 127.0.0.1: two
// sites with their own tables (one holds a single class of the two named by --classes) compute the
// scaling from each other's moments. Both train with the same values to the bit, equal to the mean
// and standard deviation of their rows pooled, and keep them in their checkpoints, so that `meridian
// eval` gives the same accuracy whichever site's file is at hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/control/control_client.h"
#include "models/data/standardization.h"
#include "tests/daemon/site_process.h"
#include "tests/support/meridian_command.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

struct Table {
  fs::path file;
  std::vector<float> features;  // (rows, 2) as written, unscaled
};

// `rows` rows of age (around `age`) and glucose (around `glucose`), labelled by `label_of`.
Table write_table(const fs::path& file, int rows, double age, double glucose,
                  const std::function<std::string(int)>& label_of) {
  fs::create_directories(file.parent_path());
  Table t{file, {}};
  std::ofstream out(file);
  out << "age,glucose,diagnosis\n";
  for (int i = 0; i < rows; ++i) {
    const float a = static_cast<float>(age + (i * 7) % 23);
    const float g = static_cast<float>(glucose + (i * 13) % 37 * 0.5);
    out << a << ',' << g << ',' << label_of(i) << '\n';
    t.features.insert(t.features.end(), {a, g});
  }
  return t;
}

StartArgs args_for(const std::string& name, const Table& table) {
  return StartArgs(name)
      .set("--train", table.file)
      .set("--classes", "benign,malignant")
      .set("--label-column", "diagnosis")
      .set("--min-sites", 2)
      .mlp(8)
      .set("--epochs", 2)
      .set("--batch", 8)
      .set("--seed", 3)
      .set("--heartbeat-interval", "0.2")
      .set("--join-timeout", 600);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("sites scale their inputs with the mean and deviation of all their rows, computed from each other's moments",
          "[daemon][normalization][data][process]") {
  TempDir dir;
  const auto ohio = write_table(dir.path() / "ohio" / "train.csv", 40, 30, 90,
                                [](int i) { return i % 3 == 0 ? "malignant" : "benign"; });
  // Older patients with higher glucose, and only one class.
  const auto utah = write_table(dir.path() / "utah" / "train.csv", 24, 60, 140, [](int) { return "malignant"; });

  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", ohio));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args_for("beta", utah).join(endpoint));
  const int beta_exit = beta.wait_exit(std::chrono::seconds(300));
  const int alpha_exit = alpha.wait_exit(std::chrono::seconds(300));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  REQUIRE(alpha_exit == 0);
  REQUIRE(beta_exit == 0);
  CHECK(contains(beta.log(), "classes in this site's part: benign 0, malignant 24"));
  CHECK(contains(alpha.log(), "classes in this site's part: benign 26, malignant 14"));
  CHECK(contains(alpha.log(), "input scaling agreed over 2 sites (64 training rows)"));

  REQUIRE_FALSE(alpha.checkpoints().empty());
  REQUIRE_FALSE(beta.checkpoints().empty());
  const auto a = meridian::daemon::read_checkpoint_file(alpha.checkpoints().back());
  const auto b = meridian::daemon::read_checkpoint_file(beta.checkpoints().back());
  CHECK(a.input_mean == b.input_mean);  // to the bit
  CHECK(a.input_stddev == b.input_stddev);
  std::vector<float> pooled = ohio.features;
  pooled.insert(pooled.end(), utah.features.begin(), utah.features.end());
  const auto expected = meridian::models::data::Standardization::fit(pooled, 2);
  REQUIRE(a.input_mean.size() == 2);
  for (std::size_t f = 0; f < 2; ++f) {
    CHECK(a.input_mean[f] == Approx(expected.mean[f]).epsilon(1e-6));
    CHECK(a.input_stddev[f] == Approx(expected.stddev[f]).epsilon(1e-6));
  }

  // The checkpoint's scaling, not the file's: either site's table gives the same evaluation.
  const auto checkpoint = alpha.checkpoints().back().string();
  const auto test =
      write_table(dir.path() / "test.csv", 30, 40, 110, [](int i) { return i % 2 ? "benign" : "malignant"; });
  auto eval = [&](const Table& train) {
    return meridian::tests::run_meridian("eval --checkpoint " + checkpoint + " --train " + train.file.string() +
                                         " --test " + test.file.string() +
                                         " --classes benign,malignant --label-column diagnosis --json");
  };
  const auto with_ohio = eval(ohio), with_utah = eval(utah);
  INFO(with_ohio.output << "\n" << with_utah.output);
  REQUIRE(with_ohio.exit_code == 0);
  CHECK(with_ohio.output == with_utah.output);
}

TEST_CASE("a site that joins a running federation takes the federation's input scaling",
          "[daemon][normalization][data][join][process]") {
  TempDir dir;
  auto label = [](int i) { return i % 2 ? "benign" : "malignant"; };
  const auto ohio = write_table(dir.path() / "ohio.csv", 32, 30, 90, label);
  const auto utah = write_table(dir.path() / "utah.csv", 32, 60, 140, label);
  const auto iowa = write_table(dir.path() / "iowa.csv", 32, 90, 200, label);
  // Long enough (12000 steps of a tiny model) for the third site to come while the first two train.
  auto args = [&](const std::string& name, const Table& table) {
    return args_for(name, table).set("--algo", "allreduce").set("--eval-every", 1000000).set("--epochs", 3000);
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", ohio));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args("beta", utah).join(endpoint));
  meridian::daemon::ControlClient control((alpha.run_dir() / "control.sock").string());
  const bool training = eventually_from_process([&] {
    if (alpha.exited()) return true;
    try {
      return control.status().state == "training";
    } catch (const std::exception&) {
      return false;  // the control socket is not up yet
    }
  });
  INFO("alpha:\n" << alpha.log());
  REQUIRE(training);
  REQUIRE_FALSE(alpha.exited());
  SiteProcess gamma(dir.path() / "gamma", args("gamma", iowa).join(endpoint));
  std::vector<int> codes;
  for (auto* s : {&alpha, &beta, &gamma}) codes.push_back(s->wait_exit(std::chrono::seconds(600)));
  INFO("beta:\n" << beta.log() << "\ngamma:\n" << gamma.log());
  for (const int code : codes) REQUIRE(code == 0);
  CHECK(contains(gamma.log(), "input scaling of the running federation: mean "));

  // The first two sites' rows, not the newcomer's: the scaling is fixed once, before the first step.
  const auto a = meridian::daemon::read_checkpoint_file(alpha.checkpoints().back());
  const auto g = meridian::daemon::read_checkpoint_file(gamma.checkpoints().back());
  CHECK(g.input_mean == a.input_mean);
  CHECK(g.input_stddev == a.input_stddev);
  std::vector<float> pooled = ohio.features;
  pooled.insert(pooled.end(), utah.features.begin(), utah.features.end());
  const auto expected = meridian::models::data::Standardization::fit(pooled, 2);
  REQUIRE(a.input_mean.size() == 2);
  CHECK(a.input_mean[0] == Approx(expected.mean[0]).epsilon(1e-6));
  CHECK(a.input_stddev[1] == Approx(expected.stddev[1]).epsilon(1e-6));
}

TEST_CASE("a site that resumes keeps the input scaling of its checkpoint", "[daemon][normalization][data][process]") {
  TempDir dir;
  auto label = [](int i) { return i % 2 ? "benign" : "malignant"; };
  const auto first = write_table(dir.path() / "ohio.csv", 32, 30, 90, label);
  const auto args = args_for("alpha", first).set("--min-sites", 1).set("--algo", "local");
  meridian::daemon::Checkpoint before;
  {
    SiteProcess alpha(dir.path() / "run", args);
    INFO(alpha.log());
    REQUIRE(alpha.wait_exit() == 0);
    CHECK(contains(alpha.log(), "input scaling from this site's 32 rows: mean "));
    REQUIRE_FALSE(alpha.checkpoints().empty());
    before = meridian::daemon::read_checkpoint_file(alpha.checkpoints().back());
  }
  REQUIRE(before.input_mean.size() == 2);
  // Other rows under the same name: a resumed run must not rescale with them (the run continued to a
  // longer --epochs, as a finished one would train nothing).
  (void)write_table(dir.path() / "ohio.csv", 32, 70, 190, label);
  SiteProcess again(dir.path() / "run", StartArgs(args).set("--epochs", 4));
  INFO(again.log());
  REQUIRE(again.wait_exit() == 0);
  CHECK(contains(again.log(), "input scaling from the checkpoint: mean "));
  const auto after = meridian::daemon::read_checkpoint_file(again.checkpoints().back());
  CHECK(after.input_mean == before.input_mean);
  CHECK(after.input_stddev == before.input_stddev);
}

// `meridian start` on a network with batch norm: its checkpoints carry the running statistics (with the
// input standardization and a model file's text, as `meridian train --save` writes them), so that
// `meridian eval` and `meridian export` take them, and a restart of the finished run leaves them and
// result.json as they are.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_daemon.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// One site alone (--algo local) on a twentieth of Fashion-MNIST: a few steps of `model`.
StartArgs lone_site_args(const std::string& model) {
  return StartArgs("s0")
      .site(0, 20)
      .set("--algo", "local")
      .set("--model", model)
      .set("--widths", 16)
      .set("--epochs", "0.5")
      .set("--seed", 7)
      .set("--lr", "0.05")
      .set("--optimizer", "momentum")
      .set("--data-dir", meridian::tests::fashion_mnist_dir());
}

nlohmann::json result_of(const SiteProcess& site) {
  return nlohmann::json::parse(meridian::tests::file_contents(site.run_dir() / "result.json"));
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE(
    "start's checkpoints of a batch-norm model go to eval and export, and a restart of the finished run keeps them",
    "[process][daemon][checkpoint][norm-state]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  // A built-in network, and one from a model file, whose text the checkpoint must carry for eval and
  // export to rebuild it.
  const std::string model_text = "model tiny-bn\nflatten\nlinear 16\nbatch_norm\nrelu\nlinear classes\n";
  const fs::path model_file = dir.path() / "tiny-bn.model";
  std::ofstream(model_file) << model_text;
  const bool from_file = GENERATE(false, true);
  const std::string model = from_file ? model_file.string() : "mlp-bn";
  INFO("--model " << model);
  const fs::path run = dir.path() / "s0";
  fs::path final_file;
  meridian::daemon::Checkpoint first;
  double accuracy = 0;
  {
    SiteProcess site(run, lone_site_args(model));
    const int rc = site.wait_exit(std::chrono::seconds(300));
    INFO(site.log());
    REQUIRE(rc == 0);
    const auto result = result_of(site);
    REQUIRE(result["completed"] == true);
    REQUIRE(result["steps"].get<int>() > 0);
    accuracy = result["test_accuracy"].get<double>();
    final_file = result["final_checkpoint"].get<std::string>();
    first = meridian::daemon::read_checkpoint_file(final_file);
  }
  CHECK(first.model_file == (from_file ? model_text : std::string()));
  // The running statistics are in it, trained (not the initial means 0 and variances 1).
  REQUIRE_FALSE(first.model_state.empty());
  CHECK(
      std::any_of(first.model_state.begin(), first.model_state.end(), [](float v) { return v != 0.0f && v != 1.0f; }));

  // eval rebuilds the model with them: the same accuracy as the site's own final evaluation.
  const auto eval = meridian::tests::run_meridian("eval --checkpoint " + quoted(final_file) + " --json --data-dir " +
                                                  quoted(meridian::tests::fashion_mnist_dir()) + " 2>&1");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  const auto evaluated = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
  CHECK(evaluated["test_accuracy"].get<double>() == Approx(accuracy).margin(1e-6));

  for (const std::string format : {"safetensors", "onnx"}) {
    const fs::path out = run / ("model." + format);
    const auto exported =
        meridian::tests::run_meridian("export " + quoted(final_file) + " --format " + format + " --out " + quoted(out));
    INFO(exported.output);
    CHECK(exported.exit_code == 0);
    CHECK(fs::exists(out));
  }

  // Started again, the site finds its run finished at its final checkpoint: no step to take, nothing
  // rewritten, and the exit code a service manager does not restart (daemon/site_daemon.h).
  const std::string result_text = meridian::tests::file_contents(run / "result.json");
  SiteProcess again(run, lone_site_args(model));
  const int rc = again.wait_exit(std::chrono::seconds(300));
  INFO(again.log());
  REQUIRE(rc == meridian::daemon::kExitRunFinishedBefore);
  CHECK(again.log().find("resuming from") != std::string::npos);
  CHECK(meridian::tests::file_contents(run / "result.json") == result_text);
  const auto second = meridian::daemon::read_checkpoint_file(final_file);
  CHECK(second.parameters == first.parameters);
  CHECK(second.model_state == first.model_state);  // bit for bit
}

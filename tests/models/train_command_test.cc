// `meridian train` as a user runs it: a real process on the real Fashion-MNIST files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "daemon/checkpoint/checkpoint.h"
#include "error/exit_code.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace {

using Result = meridian::tests::CommandOutput;

Result run(const std::string& args) { return meridian::tests::run_meridian(args); }

const std::string kFashionMnist = meridian::tests::fashion_mnist_dir().string();

}  // namespace

TEST_CASE("meridian train --json trains logreg on Fashion-MNIST and reports accuracy", "[cli][train][process]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  const Result r = run("train --dataset fashion-mnist --model logreg --epochs 1 --batch 128 --lr 0.1 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("epoch 1/1 step 469/469 loss") != std::string::npos);  // progress line on stderr
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex("\"test_accuracy\": ([0-9.]+)")));
  // Softmax regression reaches about 82% after one epoch; a broken trainer stays near 10%.
  CHECK(std::stod(m[1]) > 0.75);
  CHECK(std::regex_search(r.output, std::regex("\"epochs\": 1,")));
  CHECK(std::regex_search(r.output, std::regex("\"samples_per_second\": [1-9]")));
}

TEST_CASE("meridian train fails clearly on bad input", "[cli][train][process]") {
  const Result missing = run("train --data-dir /nonexistent/fashion --epochs 1");
  CHECK(missing.exit_code == meridian::error::kExitUser);
  CHECK(missing.output.find("/nonexistent/fashion") != std::string::npos);
  CHECK(missing.output.find("train-images-idx3-ubyte") != std::string::npos);
  CHECK(missing.output.find("install Debian's dataset-fashion-mnist") != std::string::npos);
  const Result bad_model = run("train --model resnet");
  CHECK(bad_model.exit_code != 0);
  CHECK(bad_model.output.find("resnet") != std::string::npos);
  const Result help = run("train --help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("Example:") != std::string::npos);
}

TEST_CASE("meridian train takes a model file and names the line of a broken one", "[cli][train][process]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  const auto path = dir / "broken.model";
  std::ofstream(path) << "flatten\nlinear 32\nrelu\nbatch_norm momentum=fast\nlinear classes\n";
  const Result broken = run("train --model " + path.string() + " --epochs 1");
  INFO(broken.output);
  CHECK(broken.exit_code != 0);
  CHECK(broken.output.find(path.string() + ":4: batch_norm: momentum must be a number, got 'fast'") !=
        std::string::npos);
}

TEST_CASE("meridian train takes start's names and defaults: --widths, fractional --epochs, momentum and constant",
          "[cli][train][process]") {
  if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
    WARN("SKIPPED: Fashion-MNIST is not installed at " << kFashionMnist << " (scripts/install-deps test)");
    return;
  }
  // A quarter epoch at batch 240 is 62.5 of 250 steps, rounded to 63 (60000 rows).
  const Result r = run("train --model mlp --widths 32,16 --epochs 0.25 --batch 240 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("momentum, lr 0.05 constant") != std::string::npos);
  CHECK(r.output.find("epoch 1/1 step 63/250 loss") != std::string::npos);
  CHECK(std::regex_search(r.output, std::regex("\"epochs\": 0.25,")));
  CHECK(std::regex_search(r.output, std::regex("\"steps\": 63,")));
  // 784·32 + 32 + 32·16 + 16 + 16·10 + 10 parameters: the widths reached the model.
  CHECK(std::regex_search(r.output, std::regex("\"parameters\": 25818,")));
  const Result old_name = run("train --model mlp --hidden 8 --epochs 0.01 --json");
  INFO(old_name.output);
  CHECK(old_name.exit_code == 0);
  CHECK(std::regex_search(old_name.output, std::regex("\"parameters\": 6370,")));  // 784·8 + 8 + 8·10 + 10
  CHECK(std::regex_search(r.output, std::regex("\"weight_decay\": 0,")));
  // The recipe docs/models.md's figures name is reported in full, weight decay included.
  const Result decayed = run("train --model mlp --hidden 8 --epochs 0.01 --weight-decay 5e-4 --json");
  INFO(decayed.output);
  CHECK(decayed.exit_code == 0);
  CHECK(decayed.output.find("lr 0.05 constant, weight decay 0.0005,") != std::string::npos);
  CHECK(std::regex_search(decayed.output, std::regex("\"weight_decay\": 0.0005,")));
}

TEST_CASE("meridian train --augment trains with start's augmentation, the same batches for the same seed",
          "[cli][train][augment][process]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  auto loss = [](const Result& r) {
    std::smatch m;
    REQUIRE(std::regex_search(r.output, m, std::regex("\"train_loss\": ([0-9.]+)")));
    return m[1].str();
  };
  const std::string common = "train --model logreg --epochs 0.05 --batch 64 --seed 7 --json";
  const Result once = run(common + " --augment crop:2,flip"), again = run(common + " --augment crop:2,flip"),
               plain = run(common);
  INFO(once.output << "\n" << plain.output);
  REQUIRE(once.exit_code == 0);
  REQUIRE(plain.exit_code == 0);
  CHECK(once.output.find("augment crop:2,flip") != std::string::npos);
  CHECK(loss(once) == loss(again));  // reproducible
  CHECK(loss(once) != loss(plain));  // and the images did change

  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  std::ofstream(dir / "t.csv") << "x,label\n1,a\n2,b\n";
  const Result table = run("train --train " + (dir / "t.csv").string() + " --augment flip");
  INFO(table.output);
  CHECK(table.exit_code == meridian::error::kExitUser);
  CHECK(table.output.find("--augment: ") != std::string::npos);
}

TEST_CASE("meridian train scales a table as a federation of one, or with the values given, and saves them",
          "[cli][train][normalization][process]") {
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  std::ofstream(dir / "t.csv") << "age,glucose,label\n40,100,a\n60,140,b\n50,120,a\n50,120,b\n";
  auto saved = [&](const std::string& options) {
    const auto file = dir / "model.mrdn";
    const Result r = run("train --train " + (dir / "t.csv").string() + " --epochs 1 --batch 2 --save " + file.string() +
                         " " + options);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return meridian::daemon::read_checkpoint_file(file);
  };
  const auto own = saved("");
  CHECK(own.input_mean == std::vector<float>{50, 120});
  CHECK(own.input_stddev[0] == Approx(std::sqrt(50.0)));
  const auto given = saved("--input-mean 45,110 --input-std 5,10");
  CHECK(given.input_mean == std::vector<float>{45, 110});
  CHECK(given.input_stddev == std::vector<float>{5, 10});
  CHECK(saved("--normalize none").input_mean.empty());
  const Result wrong = run("train --train " + (dir / "t.csv").string() + " --input-mean 1,2,3 --input-std 1,1,1");
  INFO(wrong.output);
  CHECK(wrong.exit_code == meridian::error::kExitUser);
  CHECK(wrong.output.find("has 3 means and 3 standard deviations, the data 2 features") != std::string::npos);
}

TEST_CASE("meridian train takes start's schedule grammar, and its old step form with a warning",
          "[cli][train][process]") {
  if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
    WARN("SKIPPED: Fashion-MNIST is not installed at " << kFashionMnist << " (scripts/install-deps test)");
    return;
  }
  const std::string common = "train --model mlp --hidden 8 --epochs 0.01 --json";
  const Result spelled = run(common + " --schedule step:1:0.5");
  INFO(spelled.output);
  REQUIRE(spelled.exit_code == 0);
  CHECK(spelled.output.find("deprecated") == std::string::npos);
  const Result old = run(common + " --schedule step --decay-epochs 1 --decay-factor 0.5");
  INFO(old.output);
  REQUIRE(old.exit_code == 0);
  CHECK(old.output.find("warning: --schedule step with --decay-epochs and --decay-factor is deprecated: use "
                        "--schedule step:1:0.5") != std::string::npos);
  // The same schedule either way: the same training, loss for loss.
  const std::regex loss("\"train_loss\": ([0-9.]+)");
  std::smatch a, b;
  REQUIRE(std::regex_search(spelled.output, a, loss));
  REQUIRE(std::regex_search(old.output, b, loss));
  CHECK(a[1] == b[1]);
  const Result bad = run(common + " --schedule step:0:0.5");
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--schedule: 'step:0:0.5' is not constant, cosine or step:EPOCHS:FACTOR") != std::string::npos);
}

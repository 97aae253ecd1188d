// Naming data by path on the commands (--train, --test, --classes, --layout, --augment), through the
// real `meridian` binary: `train` and `start` read a PNG image folder and an .npz pair written here,
// `eval` reads --test, and bad options are refused with every problem named by its option.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/models/data/image_bytes.h"
#include "tests/models/data/npy_bytes.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::TempDir;
using meridian::tests::run_meridian;

namespace {

// A deterministic pseudo-random byte (no generator state shared between tests).
unsigned char noise(std::uint32_t i) {
  i ^= i >> 16;
  i *= 0x7feb352dU;
  i ^= i >> 15;
  return static_cast<unsigned char>(i & 0x3f);
}

// An image folder with classes "dark" (pixels 0..63) and "bright" (192..255), `per_class` 8×8
// grayscale PNGs each: separable by mean brightness, so a few epochs reach full accuracy.
void write_image_folder(const fs::path& root, std::size_t per_class, std::uint32_t salt) {
  for (const auto& [name, base] : {std::pair{"dark", 0}, std::pair{"bright", 192}}) {
    fs::create_directories(root / name);
    for (std::size_t n = 0; n < per_class; ++n) {
      std::vector<unsigned char> pixels(64);
      for (std::size_t p = 0; p < pixels.size(); ++p)
        pixels[p] = static_cast<unsigned char>(base + noise(salt + static_cast<std::uint32_t>(n * 64 + p)));
      meridian::tests::write_png((root / name / ("img" + std::to_string(n) + ".png")).string(), 8, 8, 1, pixels);
    }
  }
}

// An .npz with x (rows, 4) float32 and y (rows) int64: the label is whether x[0] is positive.
void write_npz(const fs::path& path, std::size_t rows, std::uint32_t salt) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::size_t r = 0; r < rows; ++r) {
    const bool positive = r % 2 == 1;
    x.push_back((positive ? 1.0f : -1.0f) + static_cast<float>(noise(salt + static_cast<std::uint32_t>(r))) / 256.0f);
    for (int f = 1; f < 4; ++f)
      x.push_back(static_cast<float>(noise(salt + static_cast<std::uint32_t>(r * 4 + f))) / 64.0f);
    y.push_back(positive ? 1 : 0);
  }
  const std::string shape_x = "(" + std::to_string(rows) + ", 4)", shape_y = "(" + std::to_string(rows) + ",)";
  meridian::tests::write_zip(
      path.string(),
      {{"x.npy", meridian::tests::npy_bytes("<f4", shape_x, meridian::tests::raw_bytes(x))},
       {"y.npy", meridian::tests::npy_bytes("<i8", shape_y, meridian::tests::raw_bytes(y))}},
      true);
}

nlohmann::json last_json_line(const std::string& output) {
  const auto start = output.rfind("\n{");
  return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1));
}

std::string shell_path(const fs::path& p) { return "'" + p.string() + "'"; }

// `meridian start` alone (--algo local) with the given data options, in `dir`/run; returns the result.
meridian::tests::CommandOutput start_local(const fs::path& dir, const std::string& data) {
  return run_meridian(
      "start --name a --insecure --algo local --listen tcp://127.0.0.1:0 --metrics-address off "
      "--threads 1 --batch 8 --lr 0.1 --run-dir " +
      shell_path(dir / "run") + " " + data);
}

}  // namespace

TEST_CASE("train reads a PNG image folder named by --train and --test and reports test accuracy",
          "[cli][data][process]") {
  TempDir dir;
  write_image_folder(dir.path() / "train", 24, 1);
  write_image_folder(dir.path() / "test", 8, 9000);
  const auto r = run_meridian("train --train " + shell_path(dir.path() / "train") + " --test " +
                              shell_path(dir.path() / "test") + " --model logreg --epochs 8 --batch 8 --lr 0.1 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto result = last_json_line(r.output);
  CHECK(result["classes"] == 2);
  CHECK(result["test_samples"] == 16);
  const double accuracy = result["test_accuracy"].get<double>();
  CHECK(accuracy == 1.0);
  CHECK(result["dataset"] == (dir.path() / "train").string());
}

TEST_CASE("train reads an .npz pair, and without --test reports that there is no test accuracy",
          "[cli][data][process]") {
  TempDir dir;
  write_npz(dir.path() / "train.npz", 64, 1);
  write_npz(dir.path() / "test.npz", 32, 5000);
  const auto r = run_meridian("train --train " + shell_path(dir.path() / "train.npz") + " --test " +
                              shell_path(dir.path() / "test.npz") + " --model logreg --epochs 5 --batch 8 --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto result = last_json_line(r.output);
  CHECK(result["test_samples"] == 32);
  CHECK(result["test_accuracy"].get<double>() >= 0.9);

  const auto alone =
      run_meridian("train --train " + shell_path(dir.path() / "train.npz") + " --model logreg --epochs 1");
  INFO(alone.output);
  CHECK(alone.exit_code == 0);
  CHECK(alone.output.find("no test accuracy: no --test given") != std::string::npos);
}

TEST_CASE("a class list naming a class the data lacks is accepted by train, start and eval", "[cli][data][process]") {
  TempDir dir;
  write_image_folder(dir.path() / "train", 16, 1);
  write_image_folder(dir.path() / "test", 8, 9000);
  const std::string data = "--train " + shell_path(dir.path() / "train") + " --test " +
                           shell_path(dir.path() / "test") + " --classes bright,dark,grey";
  const auto trained = run_meridian("train " + data + " --model logreg --epochs 3 --batch 8 --json");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK(last_json_line(trained.output)["classes"] == 3);

  // start: this site is one of two, holding part of the rows (the split of the whole folder).
  const auto started = start_local(dir.path(), data + " --epochs 10 --site-count 2 --site-index 1 --model logreg");
  INFO(started.output);
  REQUIRE(started.exit_code == 0);
  std::ifstream result_file(dir.path() / "run" / "result.json");
  const auto result = nlohmann::json::parse(result_file);
  CHECK(result["completed"] == true);
  const double accuracy = result["test_accuracy"].get<double>();
  CHECK(accuracy >= 0.9);

  // eval: the same test folder with the run's class list gives the run's own final accuracy.
  const std::string checkpoint = result["final_checkpoint"].get<std::string>();
  const auto evaluated = run_meridian("eval --checkpoint " + shell_path(checkpoint) + " --test " +
                                      shell_path(dir.path() / "test") + " --classes bright,dark,grey --json");
  INFO(evaluated.output);
  REQUIRE(evaluated.exit_code == 0);
  const double evaluated_accuracy = last_json_line(evaluated.output)["test_accuracy"].get<double>();
  CHECK(evaluated_accuracy == Approx(accuracy).margin(1e-6));
}

TEST_CASE("bad data options are refused with every problem named by its option", "[cli][data][process]") {
  TempDir dir;
  const std::string missing = shell_path(dir.path() / "no-such-folder");
  SECTION("train") {
    const auto r = run_meridian("train --train " + missing + " --classes a,a --layout hwcn");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--train: ") != std::string::npos);
    CHECK(r.output.find("no-such-folder") != std::string::npos);
    CHECK(r.output.find("--classes: ") != std::string::npos);
    CHECK(r.output.find("--layout: ") != std::string::npos);
  }
  SECTION("train: --test without --train") {
    const auto r = run_meridian("train --test " + missing);
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--test: applies with --train only") != std::string::npos);
  }
  SECTION("start") {
    const auto r = start_local(dir.path(), "--train " + missing + " --test " + shell_path(dir.path() / "nope.npz") +
                                               " --layout hwcn --augment crop:x");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--train: ") != std::string::npos);
    CHECK(r.output.find("--test: ") != std::string::npos);
    CHECK(r.output.find("nope.npz") != std::string::npos);
    CHECK(r.output.find("--layout: ") != std::string::npos);
    CHECK(r.output.find("--augment: ") != std::string::npos);
  }
  SECTION("start: augmentation of a table") {
    write_npz(dir.path() / "train.npz", 16, 1);
    const auto r = start_local(dir.path(), "--train " + shell_path(dir.path() / "train.npz") + " --augment flip");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--augment: augmentation flip needs images") != std::string::npos);
  }
}

TEST_CASE("simulate hands --train, --test and --classes to every site, which split the data",
          "[cli][data][simulate][process]") {
  TempDir dir;
  write_npz(dir.path() / "train.npz", 64, 1);
  write_npz(dir.path() / "test.npz", 32, 5000);
  const fs::path out = dir.path() / "sim";
  const auto r = run_meridian(
      "simulate --sites 2 --algo local --insecure --model logreg --epochs 4 --batch 8 "
      "--eval-every 4 --train " +
      shell_path(dir.path() / "train.npz") + " --test " + shell_path(dir.path() / "test.npz") +
      " --classes 0,1 --out " + shell_path(out) + " --json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* site : {"site-0", "site-1"}) {
    const std::string text = meridian::tests::file_contents(out / "local" / site / "site.toml");
    CHECK(text.find("train = \"" + (dir.path() / "train.npz").string() + "\"") != std::string::npos);
    CHECK(text.find("classes = \"0,1\"") != std::string::npos);
    std::ifstream result_file(out / "local" / site / "result.json");
    const auto result = nlohmann::json::parse(result_file);
    CHECK(result["completed"] == true);
    const double accuracy = result["test_accuracy"].get<double>();
    CHECK(accuracy >= 0.9);
    // Each site trains on its half: 64 rows / 2 sites / batch 8 = 4 steps an epoch, 4 epochs.
    CHECK(result["steps"] == 16);
  }
}

TEST_CASE("start trains on an image folder with --augment crop and flip", "[cli][data][process]") {
  TempDir dir;
  write_image_folder(dir.path() / "train", 16, 1);
  write_image_folder(dir.path() / "test", 8, 9000);
  const auto r = start_local(dir.path(), "--train " + shell_path(dir.path() / "train") + " --test " +
                                             shell_path(dir.path() / "test") +
                                             " --augment crop:2,flip --epochs 10 --model logreg");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream result_file(dir.path() / "run" / "result.json");
  const auto result = nlohmann::json::parse(result_file);
  CHECK(result["completed"] == true);
  // Shifted and mirrored, dark images stay dark: the classes remain separable.
  const double accuracy = result["test_accuracy"].get<double>();
  CHECK(accuracy >= 0.9);
}

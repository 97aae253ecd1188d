// A model to take home: `meridian train --save` writes a checkpoint, `meridian export` turns it into
// safetensors and ONNX, and the exported model, run by PyTorch (python/meridian_torch.py) or as an ONNX
// graph (tests/cli/export_check.py evaluates its nodes with torch after onnx.checker), gives the logits
// and the test accuracy that Meridian gives, from raw inputs. All through real processes; the logits on
// Meridian's side come from the checkpoint rebuilt in process as `meridian eval` rebuilds it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "models/data/data_source.h"
#include "models/data/idx_reader.h"
#include "tests/models/data/npy_bytes.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::TempDir;
using meridian::tests::run_meridian;

namespace {

const std::string kFashionMnist = meridian::tests::fashion_mnist_dir().string();
// Debian's interpreter: python3-torch and python3-onnx are installed for it (scripts/install-deps test),
// whatever other python3 comes first on PATH.
const std::string kPython = "/usr/bin/python3";
constexpr std::size_t kLogitRows = 100;

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

using meridian::tests::run_shell;

bool python_has_torch_and_onnx() {
  return std::system((kPython + " -c 'import numpy, torch, onnx' >/dev/null 2>&1").c_str()) == 0;
}

void write_floats(const fs::path& path, const float* values, std::size_t count) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values), static_cast<std::streamsize>(count * sizeof(float)));
  REQUIRE(out.good());
}

std::vector<float> read_floats(const fs::path& path) {
  REQUIRE(fs::is_regular_file(path));
  const std::string bytes = meridian::tests::file_contents(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

nlohmann::json last_json_line(const std::string& output) {
  const auto start = output.rfind("\n{");
  return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1));
}

// The first `rows` Fashion-MNIST training images as an .npz (x float32 (rows, 1, 28, 28) in [0, 1],
// y int64): a small training set, so that each model trains in a moment.
void write_training_subset(const fs::path& path, std::size_t rows) {
  const auto train = meridian::models::data::load_fashion_mnist(kFashionMnist, true, [rows](auto labels) {
    std::vector<std::size_t> first(std::min(rows, labels.size()));
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    return first;
  });
  std::vector<float> x(train.features.begin(), train.features.end());
  std::vector<std::int64_t> y(train.labels.begin(), train.labels.end());
  const std::string n = std::to_string(train.rows);
  meridian::tests::write_zip(
      path.string(),
      {{"x.npy", meridian::tests::npy_bytes("<f4", "(" + n + ", 1, 28, 28)", meridian::tests::raw_bytes(x))},
       {"y.npy", meridian::tests::npy_bytes("<i8", "(" + n + ",)", meridian::tests::raw_bytes(y))}},
      true);
}

// Logits (rows, classes) of the checkpoint's model on the first `rows` rows of `data`, rebuilt as
// `meridian eval` rebuilds it (daemon/checkpoint/checkpoint_model.h).
std::vector<float> meridian_logits(const fs::path& checkpoint, const meridian::models::data::Dataset& data,
                                   std::size_t rows) {
  const auto cp = meridian::daemon::read_checkpoint_file(checkpoint);
  auto model = meridian::daemon::model_from_checkpoint(cp, data, checkpoint.string());
  const float* logits = model->forward(data.features.data(), rows);
  return std::vector<float>(logits, logits + rows * model->classes());
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

double accuracy(const std::vector<float>& logits, const std::vector<std::int32_t>& labels, std::size_t classes) {
  std::size_t correct = 0;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(r * classes);
    correct += std::max_element(row, row + static_cast<std::ptrdiff_t>(classes)) - row == labels[r];
  }
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

// Runs tests/cli/export_check.py (`kind` torch or onnx) on `rows` raw inputs; returns its logits.
std::vector<float> exported_logits(const std::string& kind, const fs::path& model, const fs::path& inputs,
                                   std::size_t rows, const fs::path& dir) {
  const fs::path out = dir / ("logits-" + kind + ".f32");
  const auto r =
      run_shell(kPython + " " + std::string(meridian::tests::source_dir()) + "/tests/cli/export_check.py " + kind +
                " " + quoted(model) + " " + quoted(inputs) + " " + std::to_string(rows) + " " + quoted(out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  if (kind == "onnx") CHECK(r.output.find("opset=13") != std::string::npos);
  return read_floats(out);
}

// Trains `model_args` briefly on the training subset with --save, exports it both ways, and checks
// that PyTorch and the ONNX graph give Meridian's logits on the first test images and, through PyTorch,
// `meridian eval`'s accuracy on the whole test set.
void check_round_trip(const TempDir& tmp, const std::string& name, const std::string& model_args,
                      const meridian::models::data::Dataset& test, const fs::path& test_inputs) {
  INFO(name << ": " << model_args);
  const fs::path dir = tmp.path() / name;
  fs::create_directories(dir);
  const fs::path checkpoint = dir / "model.mrdn";
  const auto trained = run_meridian("train --train " + quoted(tmp.path() / "train.npz") +
                                    " --layout nchw --epochs 1 --batch 32 --lr 0.05 --threads 1 " + model_args +
                                    " --save " + quoted(checkpoint));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto eval = run_meridian("eval --checkpoint " + quoted(checkpoint) + " --json");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  const double eval_accuracy = last_json_line(eval.output)["test_accuracy"].get<double>();

  for (const std::string format : {"safetensors", "onnx"}) {
    const fs::path file = dir / ("model." + format);
    const auto exported =
        run_meridian("export " + quoted(checkpoint) + " --format " + format + " --out " + quoted(file));
    INFO(exported.output);
    REQUIRE(exported.exit_code == 0);
  }
  const auto reference = meridian_logits(checkpoint, test, kLogitRows);
  const auto torch_logits = exported_logits("torch", dir / "model.safetensors", test_inputs, test.rows, dir);
  REQUIRE(torch_logits.size() == test.rows * test.classes);
  const std::vector<float> torch_first(torch_logits.begin(),
                                       torch_logits.begin() + static_cast<std::ptrdiff_t>(kLogitRows * test.classes));
  const double torch_accuracy = accuracy(torch_logits, test.labels, test.classes);
  const fs::path first_inputs = dir / "first.f32";
  write_floats(first_inputs, test.features.data(), kLogitRows * test.dim);
  const auto onnx_logits = exported_logits("onnx", dir / "model.onnx", first_inputs, kLogitRows, dir);
  const float torch_difference = max_difference(torch_first, reference);
  const float onnx_difference = max_difference(onnx_logits, reference);
  WARN(name << ": eval accuracy " << eval_accuracy << ", PyTorch " << torch_accuracy << "; largest logit difference "
            << torch_difference << " (PyTorch), " << onnx_difference << " (ONNX)");
  CHECK(torch_difference <= 1e-4f);
  CHECK(onnx_difference <= 1e-4f);
  CHECK(std::fabs(torch_accuracy - eval_accuracy) <= 1e-4);
  // A model that learned nothing would make equal accuracies say little (chance is 0.1).
  CHECK(eval_accuracy > 0.15);
}

}  // namespace

TEST_CASE("exported models give meridian eval's logits and accuracy in PyTorch and ONNX", "[process][export]") {
  if (!python_has_torch_and_onnx()) {
    WARN("SKIPPED: " << kPython << " lacks numpy, torch or onnx (scripts/install-deps test installs them)");
    return;
  }
  TempDir tmp;
  write_training_subset(tmp.path() / "train.npz", 512);
  const auto test = meridian::models::data::load_fashion_mnist(kFashionMnist, false);
  const fs::path test_inputs = tmp.path() / "test.f32";
  write_floats(test_inputs, test.features.data(), test.features.size());

  // A model file with the layers the built-ins lack: sigmoid, an identity residual block, group norm,
  // GELU, average pooling, tanh and dropout.
  const fs::path mix = tmp.path() / "mix.model";
  std::ofstream(mix) << "model export-mix\nconv2d 8 kernel=3 padding=1\nbatch_norm\nsigmoid\nmax_pool 2\n"
                        "residual\n  conv2d 8 kernel=3 padding=1\n  group_norm 2\n  gelu\nend\navg_pool 2\ntanh\n"
                        "flatten\ndropout 0.2\nlinear classes\n";
  SECTION("mlp") { check_round_trip(tmp, "mlp", "--model mlp --hidden 64,32", test, test_inputs); }
  SECTION("cnn") { check_round_trip(tmp, "cnn", "--model cnn", test, test_inputs); }
  SECTION("batch norm (mlp-bn)") { check_round_trip(tmp, "mlp-bn", "--model mlp-bn --hidden 64", test, test_inputs); }
  SECTION("logreg") { check_round_trip(tmp, "logreg", "--model logreg", test, test_inputs); }
  SECTION("a model file with batch norm and a projection shortcut") {
    check_round_trip(
        tmp, "small-resnet",
        "--model " + quoted(fs::path(meridian::tests::source_dir()) / "examples/models/small-resnet.model"), test,
        test_inputs);
  }
  SECTION("a model file with group norm, GELU, tanh, sigmoid and pooling") {
    check_round_trip(tmp, "mix", "--model " + quoted(mix), test, test_inputs);
  }
}

TEST_CASE("an exported CSV model takes the raw columns: the training standardization is inside", "[process][export]") {
  if (!python_has_torch_and_onnx()) {
    WARN("SKIPPED: " << kPython << " lacks numpy, torch or onnx (scripts/install-deps test installs them)");
    return;
  }
  TempDir tmp;
  // Columns on very different scales (around 1000, 0.01 and -40): without the standardization the
  // exported model's logits would be far from Meridian's.
  const auto write_csv = [](const fs::path& path, std::size_t rows, std::uint32_t salt, std::vector<float>* raw) {
    std::ofstream out(path);
    out << "income,ratio,temperature,label\n";
    for (std::uint32_t r = 0; r < rows; ++r) {
      const std::uint32_t h = (r + salt) * 2654435761U;
      const float income = 1000.0f + static_cast<float>(h % 997);
      const float ratio = 0.01f * static_cast<float>((h >> 10) % 100);
      const float temperature = -40.0f + static_cast<float>((h >> 20) % 80);
      out << income << "," << ratio << "," << temperature << "," << (income + 400.0f * ratio > 1700.0f ? "high" : "low")
          << "\n";
      if (raw) raw->insert(raw->end(), {income, ratio, temperature});
    }
  };
  std::vector<float> raw_test;
  write_csv(tmp.path() / "train.csv", 400, 1, nullptr);
  write_csv(tmp.path() / "test.csv", kLogitRows, 7, &raw_test);
  const fs::path checkpoint = tmp.path() / "table.mrdn";
  const auto trained =
      run_meridian("train --train " + quoted(tmp.path() / "train.csv") + " --test " + quoted(tmp.path() / "test.csv") +
                   " --model mlp --hidden 16 --epochs 3 --batch 16 --threads 1 --save " + quoted(checkpoint));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const auto cp = meridian::daemon::read_checkpoint_file(checkpoint);
  CHECK(cp.input_mean.size() == 3);
  CHECK(cp.input_stddev.size() == 3);

  const auto data = meridian::models::data::load_train_and_test((tmp.path() / "train.csv").string(),
                                                                (tmp.path() / "test.csv").string());
  const auto reference = meridian_logits(checkpoint, data.test, kLogitRows);
  const fs::path inputs = tmp.path() / "raw.f32";
  write_floats(inputs, raw_test.data(), raw_test.size());
  for (const std::string format : {"safetensors", "onnx"}) {
    const fs::path file = tmp.path() / ("table." + format);
    const auto exported =
        run_meridian("export " + quoted(checkpoint) + " --format " + format + " --out " + quoted(file));
    INFO(exported.output);
    REQUIRE(exported.exit_code == 0);
    CHECK(exported.output.find("input standardization included") != std::string::npos);
    const auto logits = exported_logits(format == "onnx" ? "onnx" : "torch", file, inputs, kLogitRows, tmp.path());
    const float difference = max_difference(logits, reference);
    WARN("CSV model, " << format << ": largest logit difference " << difference);
    CHECK(difference <= 1e-4f);
  }
}

TEST_CASE("meridian export refuses missing, corrupt and unknown checkpoints with a clear error", "[process][export]") {
  TempDir tmp;
  const fs::path out = tmp.path() / "out.onnx";
  const auto export_to = [&](const fs::path& checkpoint, const std::string& format = "onnx",
                             const fs::path& target = {}) {
    return run_meridian("export " + quoted(checkpoint) + " --format " + format + " --out " +
                        quoted(target.empty() ? out : target));
  };

  SECTION("a file that is not there") {
    const auto r = export_to(tmp.path() / "nothing.mrdn");
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("nothing.mrdn: cannot open") != std::string::npos);
  }
  SECTION("a file that is not a checkpoint") {
    std::ofstream(tmp.path() / "notes.mrdn") << "these are notes, not a model, but long enough to have a header";
    const auto r = export_to(tmp.path() / "notes.mrdn");
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("not a Meridian checkpoint") != std::string::npos);
  }

  // A valid checkpoint of a made-up model, written as `meridian start` writes them.
  const auto write = [&](const std::string& name, const std::string& fingerprint, std::size_t parameters) {
    std::vector<float> values(parameters, 0.5f);
    meridian::daemon::CheckpointView view;
    view.parameters = values;
    view.model_fingerprint = fingerprint;
    view.algorithm = "train";
    REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(tmp.path() / name, view));
    return tmp.path() / name;
  };
  SECTION("a truncated checkpoint") {
    const auto file = write("cut.mrdn", "logreg|in=1x2x2|flatten|linear(4->2)|classes=2|params=10", 10);
    fs::resize_file(file, fs::file_size(file) - 9);
    const auto r = export_to(file);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("cut.mrdn: truncated") != std::string::npos);
  }
  SECTION("a layer this build does not know") {
    const auto r = export_to(write("swish.mrdn", "odd|in=1x2x2|flatten|swish|linear(4->2)|classes=2|params=10", 10));
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("swish.mrdn") != std::string::npos);
    CHECK(r.output.find("unknown layer 'swish'") != std::string::npos);
  }
  SECTION("parameters that do not fit the model") {
    const auto r = export_to(write("short.mrdn", "logreg|in=1x2x2|flatten|linear(4->2)|classes=2|params=10", 7));
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("has 10 parameters and 0 state values, but 7 and 0 were given") != std::string::npos);
  }
  SECTION("an unknown format") {
    const auto r =
        export_to(write("ok.mrdn", "logreg|in=1x2x2|flatten|linear(4->2)|classes=2|params=10", 10), "pytorch");
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("pytorch") != std::string::npos);
    CHECK(r.output.find("safetensors") != std::string::npos);
  }
  SECTION("an output file that cannot be written") {
    const auto r = export_to(write("ok.mrdn", "logreg|in=1x2x2|flatten|linear(4->2)|classes=2|params=10", 10),
                             "safetensors", tmp.path() / "no-such-folder" / "m.safetensors");
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("no-such-folder/m.safetensors: cannot write") != std::string::npos);
  }
}

// One way to name CSV data, through the real `meridian` binary: --train/--test (with --classes) is
// the documented form; the old --dataset csv --train-csv/--test-csv keeps working on train, start and
// eval with a deprecation warning, mixes with the new options, and every data error names the file
// at fault and the option that fixes it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "error/exit_code.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::TempDir;
using meridian::tests::run_meridian;

namespace {

std::string shell_path(const fs::path& p) { return "'" + p.string() + "'"; }

// `rows` rows of two features, labelled 0 or 1 (and 2 where `with_two`).
fs::path write_table(const fs::path& file, int rows, bool with_two) {
  std::ofstream out(file);
  out << "age,glucose,label\n";
  for (int i = 0; i < rows; ++i) out << 30 + i % 17 << ',' << 90 + (i * 7) % 31 << ',' << (with_two ? i % 3 : i % 2) << '\n';
  return file;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

meridian::tests::CommandOutput start_local(const fs::path& dir, const std::string& data) {
  return run_meridian(
      "start --name a --insecure --algo local --listen tcp://127.0.0.1:0 --metrics-address off "
      "--threads 1 --batch 8 --epochs 1 --model logreg --run-dir " +
      shell_path(dir / "run") + " " + data);
}

}  // namespace

TEST_CASE("the old CSV options work on train, start and eval, with a warning naming the new ones",
          "[cli][data][process]") {
  TempDir dir;
  const auto train = write_table(dir.path() / "train.csv", 30, false);
  const auto test = write_table(dir.path() / "test.csv", 12, true);
  const std::string deprecated = "is deprecated: name the data as --";

  // The old form with --classes: the test file's class 2 is declared.
  const auto trained = run_meridian("train --dataset csv --train-csv " + shell_path(train) + " --test-csv " +
                                    shell_path(test) + " --classes 0,1,2 --model logreg --epochs 1 --batch 8 --save " +
                                    shell_path(dir.path() / "m.mrdn"));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK(contains(trained.output, deprecated));

  // A config's dataset = "csv" next to --train is not refused.
  std::ofstream(dir.path() / "site.toml") << "dataset = \"csv\"\n";
  const auto started = start_local(dir.path(), "--config " + shell_path(dir.path() / "site.toml") + " --train " +
                                                   shell_path(train) + " --test " + shell_path(test) +
                                                   " --classes 0,1,2");
  INFO(started.output);
  CHECK(started.exit_code == 0);
  const auto old_start = start_local(dir.path() / "old", "--dataset csv --train-csv " + shell_path(train) +
                                                             " --test-csv " + shell_path(test) + " --classes 0,1,2");
  INFO(old_start.output);
  CHECK(old_start.exit_code == 0);
  CHECK(contains(old_start.output, deprecated));

  // eval with the old form alone reads the test file (it used to name an empty file).
  const auto evaluated = run_meridian("eval --checkpoint " + shell_path(dir.path() / "m.mrdn") +
                                      " --dataset csv --test-csv " + shell_path(test) + " --classes 0,1,2 --json");
  INFO(evaluated.output);
  REQUIRE(evaluated.exit_code == 0);
  CHECK(contains(evaluated.output, deprecated));
  CHECK(contains(evaluated.output, "\"test_samples\": 12"));
}

TEST_CASE("a test file with a class the training file lacks names the file and the option that fixes it",
          "[cli][data][process]") {
  TempDir dir;
  const auto train = write_table(dir.path() / "train.csv", 30, false);
  const auto test = write_table(dir.path() / "test.csv", 12, true);
  for (const std::string& form : {"--train " + shell_path(train) + " --test " + shell_path(test),
                                 "--dataset csv --train-csv " + shell_path(train) + " --test-csv " + shell_path(test)}) {
    const auto r = run_meridian("train " + form + " --model logreg --epochs 1");
    INFO(r.output);
    CHECK(r.exit_code == meridian::error::kExitUser);
    CHECK(contains(r.output, test.string() + ": line 4: label '2' is not one of the 2 classes of the training data " +
                                 train.string() + " (0, 1): if it is a class, declare the full class list with "
                                                  "--classes 0,1,2"));
  }
  const auto both = run_meridian("train --train " + shell_path(train) + " --train-csv " + shell_path(test));
  INFO(both.output);
  CHECK(both.exit_code == meridian::error::kExitUser);
  CHECK(contains(both.output, "--train-csv: names " + test.string() + " but --train names " + train.string()));
}

TEST_CASE("a messy table trains with its category, identifier and missing values declared", "[cli][data][process]") {
  TempDir dir;
  const fs::path train = dir.path() / "messy.csv";
  {
    std::ofstream out(train);
    out << "mrn,age,sex,glucose,label\n";
    for (int i = 0; i < 24; ++i)
      out << "P" << i << ',' << (i % 5 == 0 ? std::string("NA") : std::to_string(30 + i)) << ','
          << (i % 2 ? "F" : "M") << ',' << (i % 7 == 0 ? std::string("") : std::to_string(90 + i)) << ',' << i % 2
          << '\n';
  }
  const auto refused = run_meridian("train --train " + shell_path(train) + " --epochs 1");
  INFO(refused.output);
  CHECK(refused.exit_code == meridian::error::kExitUser);
  CHECK(contains(refused.output, "'P0' is not a number: if the column holds categories, declare it with "
                                 "--categorical mrn; if it is an identifier, leave it out with --ignore-columns mrn"));
  const auto trained = run_meridian("train --train " + shell_path(train) +
                                    " --ignore-columns mrn --categorical sex --missing-indicators --epochs 1 --json");
  INFO(trained.output);
  CHECK(trained.exit_code == 0);
  const auto none = run_meridian("train --train " + shell_path(train) +
                                 " --ignore-columns mrn --categorical sex --normalize none --epochs 1");
  INFO(none.output);
  CHECK(none.exit_code == meridian::error::kExitUser);
  CHECK(contains(none.output, train.string() + ": has 9 missing values, and --normalize none leaves nothing"));
}

TEST_CASE("eval reads a test table with the checkpoint's class list and preprocessing, and refuses another order",
          "[cli][data][process]") {
  TempDir dir;
  // Classes declared in an order that is not the text order, and a test file in another column order
  // that lacks one class: read with classes from its own labels it would be numbered high, low, medium.
  const auto table = [&](const fs::path& file, bool test) {
    std::ofstream out(file);
    out << (test ? "risk,ward,mrn,age\n" : "mrn,age,ward,risk\n");
    for (int i = 0; i < 60; ++i) {
      const int age = 20 + (i * 13) % 70;
      const std::string ward = i % 3 == 0 ? "icu" : "medicine";
      const std::string risk = age < 40 ? "low" : age < 65 ? "medium" : "high";
      if (test && risk == "high") continue;
      const std::string mrn = "M-" + std::to_string(i);
      out << (test ? risk + ',' + ward + ',' + mrn + ',' + std::to_string(age)
                   : mrn + ',' + std::to_string(age) + ',' + ward + ',' + risk)
          << '\n';
    }
    return file;
  };
  const auto train = table(dir.path() / "train.csv", false), test = table(dir.path() / "test.csv", true);
  const fs::path checkpoint = dir.path() / "model.mrdn";
  const std::string options = " --label-column risk --ignore-columns mrn --categorical ward --classes low,medium,high";
  const auto trained =
      run_meridian("train --train " + shell_path(train) + options +
                   " --model logreg --epochs 3 --batch 8 --threads 1 --save " + shell_path(checkpoint));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);

  const auto given =
      run_meridian("eval --checkpoint " + shell_path(checkpoint) + " --test " + shell_path(test) + options + " --json");
  INFO(given.output);
  REQUIRE(given.exit_code == 0);
  const auto from_checkpoint =
      run_meridian("eval --checkpoint " + shell_path(checkpoint) + " --test " + shell_path(test) + " --json");
  INFO(from_checkpoint.output);
  REQUIRE(from_checkpoint.exit_code == 0);
  const auto accuracy = [](const std::string& output) {
    return nlohmann::json::parse(output.substr(output.rfind('{')))["test_accuracy"].get<double>();
  };
  CHECK(accuracy(from_checkpoint.output) == accuracy(given.output));

  const auto reordered =
      run_meridian("eval --checkpoint " + shell_path(checkpoint) + " --test " + shell_path(test) +
                   " --label-column risk --ignore-columns mrn --categorical ward --classes high,low,medium");
  INFO(reordered.output);
  CHECK(reordered.exit_code == meridian::error::kExitUser);
  CHECK(contains(reordered.output, test.string() + ": its class list (high, low, medium) is not the one the model was "
                                                   "trained with (low, medium, high)"));
}

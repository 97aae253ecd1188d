// Tables as hospitals hold them, through real `meridian start` processes on 127.0.0.1: three sites,
// each with its own CSV (an identifier column, missing values, category columns, the columns in
// another order at each site, and one site that has only one of the two classes), agree on the
// preprocessing without a row leaving its site: the same inputs by column name, category lists fixed
// by the federation terms, and missing values filled with the mean of the values present at all
// sites, computed from each site's counts and sums.
#include <catch2/catch.hpp>

#include <cmath>
#include <signal.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "error/exit_code.h"
#include "tests/daemon/site_process.h"
#include "tests/support/meridian_command.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

struct Row {
  std::string mrn, age, sex, ward, glucose, diagnosis;
};

// Writes `rows` with the columns in the order `header` names them.
fs::path write_table(const fs::path& file, const std::vector<std::string>& header, const std::vector<Row>& rows) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file);
  auto field = [](const Row& r, const std::string& column) -> const std::string& {
    if (column == "mrn") return r.mrn;
    if (column == "age") return r.age;
    if (column == "sex") return r.sex;
    if (column == "ward") return r.ward;
    if (column == "glucose") return r.glucose;
    return r.diagnosis;
  };
  for (std::size_t c = 0; c < header.size(); ++c) out << (c ? "," : "") << header[c];
  out << "\n";
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < header.size(); ++c) out << (c ? "," : "") << field(r, header[c]);
    out << "\n";
  }
  return file;
}

// `n` rows of a site: every `gap`-th age is missing (spelled `missing`), wards cycle through
// `wards`, labels as `label_of` says. Ages present are collected into `ages`.
std::vector<Row> rows_of(const std::string& site, int n, int base_age, int gap, const std::string& missing,
                         const std::vector<std::string>& wards, const std::function<std::string(int)>& label_of,
                         std::vector<double>& ages) {
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    Row r;
    r.mrn = site + "-" + std::to_string(1000 + i);
    const int age = base_age + (i * 7) % 29;
    if (i % gap == 0) {
      r.age = missing;
    } else {
      r.age = std::to_string(age);
      ages.push_back(age);
    }
    r.sex = i % 5 == 4 ? "" : (i % 2 ? "F" : "M");
    r.ward = wards[static_cast<std::size_t>(i) % wards.size()];
    r.glucose = i % 6 == 1 ? "NA" : std::to_string(90 + (i * 11) % 41);
    r.diagnosis = label_of(i);
    rows.push_back(std::move(r));
  }
  return rows;
}

StartArgs args_for(const std::string& name, const fs::path& train, const fs::path& test) {
  return StartArgs(name)
      .set("--train", train)
      .set("--test", test)
      .set("--classes", "benign,malignant")
      .set("--label-column", "diagnosis")
      .set("--ignore-columns", "mrn")
      .set("--categorical", "sex,ward=icu|medicine|surgery")
      .on("--missing-indicators")
      .set("--min-sites", 3)
      .mlp(8)
      .set("--epochs", 2)
      .set("--batch", 8)
      .set("--seed", 3)
      .set("--heartbeat-interval", "0.2")
      .set("--join-timeout", 600);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("three sites with messy tables agree on columns, categories and the values that fill the gaps",
          "[daemon][normalization][data][process]") {
  TempDir dir;
  std::vector<double> ages;
  auto mixed = [](int i) { return i % 3 == 0 ? "malignant" : "benign"; };
  const auto ohio = write_table(dir.path() / "ohio.csv", {"mrn", "age", "sex", "ward", "glucose", "diagnosis"},
                                rows_of("O", 40, 30, 4, "", {"icu", "medicine", "surgery"}, mixed, ages));
  // Another column order, missing values spelled NA, no surgical ward and a single class.
  const auto utah =
      write_table(dir.path() / "utah.csv", {"diagnosis", "glucose", "ward", "mrn", "sex", "age"},
                  rows_of("U", 24, 60, 5, "NA", {"icu", "medicine"}, [](int) { return "benign"; }, ages));
  const auto iowa = write_table(dir.path() / "iowa.csv", {"age", "glucose", "sex", "ward", "mrn", "diagnosis"},
                                rows_of("I", 32, 45, 3, "?", {"medicine", "surgery"}, mixed, ages));
  std::vector<double> unused;
  const auto test = write_table(dir.path() / "test.csv", {"ward", "sex", "age", "glucose", "diagnosis", "mrn"},
                                rows_of("T", 20, 40, 4, "", {"surgery", "icu"}, mixed, unused));

  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", ohio, test));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args_for("beta", utah, test).join(endpoint));
  SiteProcess gamma(dir.path() / "gamma", args_for("gamma", iowa, test).join(endpoint));
  const int beta_exit = beta.wait_exit(std::chrono::seconds(300));
  const int gamma_exit = gamma.wait_exit(std::chrono::seconds(300));
  const int alpha_exit = alpha.wait_exit(std::chrono::seconds(300));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log() << "\ngamma:\n" << gamma.log());
  REQUIRE(alpha_exit == 0);
  REQUIRE(beta_exit == 0);
  REQUIRE(gamma_exit == 0);
  CHECK(contains(beta.log(), "classes in this site's part: benign 24, malignant 0"));
  // Each site pools the moments itself, unless a faster one answers it with the scaling first.
  const std::string agreed = "input scaling agreed over 3 sites (96 training rows)";
  CHECK((contains(alpha.log(), agreed) || contains(beta.log(), agreed) || contains(gamma.log(), agreed)));

  const auto a = meridian::daemon::read_checkpoint_file(alpha.checkpoints().back());
  const auto b = meridian::daemon::read_checkpoint_file(beta.checkpoints().back());
  const auto g = meridian::daemon::read_checkpoint_file(gamma.checkpoints().back());
  CHECK(a.input_mean == b.input_mean);  // to the bit
  CHECK(a.input_mean == g.input_mean);
  CHECK(a.input_stddev == b.input_stddev);
  // Every site's checkpoint records the same names and preprocessing, for `meridian export`.
  CHECK(a.inputs == b.inputs);
  CHECK(a.inputs == g.inputs);
  CHECK(a.inputs.feature_names.size() == 9);
  CHECK(a.inputs.class_names == std::vector<std::string>{"benign", "malignant"});
  REQUIRE(a.inputs.table.has_value());
  CHECK(a.inputs.table->ignored == std::vector<std::string>{"mrn"});
  // age, glucose, age missing, glucose missing, sex=F, sex=M, ward=icu, ward=medicine, ward=surgery
  REQUIRE(a.input_mean.size() == 9);
  double sum = 0;
  for (const double age : ages) sum += age;
  CHECK(a.input_mean[0] == Approx(sum / static_cast<double>(ages.size())).epsilon(1e-6));
  CHECK(a.input_mean[2] == Approx(static_cast<double>(96 - ages.size()) / 96).epsilon(1e-6));

  // The run's checkpoint evaluates the test file read as the sites read theirs.
  const auto eval = meridian::tests::run_meridian(
      "eval --checkpoint " + alpha.checkpoints().back().string() + " --train " + iowa.string() + " --test " +
      test.string() +
      " --classes benign,malignant --label-column diagnosis --ignore-columns mrn "
      "--categorical 'sex,ward=icu|medicine|surgery' --missing-indicators --json");
  INFO(eval.output);
  CHECK(eval.exit_code == 0);
  CHECK(contains(eval.output, "\"test_samples\": 20"));
}

TEST_CASE("a site that saw other categories is refused at join, with both lists and the option named",
          "[daemon][join][data][process]") {
  TempDir dir;
  std::vector<double> ages;
  auto mixed = [](int i) { return i % 2 ? "malignant" : "benign"; };
  const std::vector<std::string> header = {"mrn", "age", "sex", "ward", "glucose", "diagnosis"};
  const auto ohio = write_table(dir.path() / "ohio.csv", header,
                                rows_of("O", 20, 30, 4, "", {"icu", "surgery"}, mixed, ages));
  const auto utah = write_table(dir.path() / "utah.csv", header, rows_of("U", 20, 30, 4, "", {"icu"}, mixed, ages));
  auto args = [&](const std::string& name, const fs::path& train) {
    return args_for(name, train, train).set("--categorical", "sex,ward").set("--min-sites", 2);
  };
  SiteProcess alpha(dir.path() / "alpha", args("alpha", ohio));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta", args("beta", utah).join(endpoint));
  const int beta_exit = beta.wait_exit(std::chrono::seconds(300));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  CHECK(beta_exit == meridian::error::kExitUser);
  CHECK(contains(beta.log(),
                 "alpha refuses this site: categories differs (alpha: sex: F, M; ward: icu, surgery; "
                 "this site: sex: F, M; ward: icu)"));
  CHECK(contains(beta.log(), "--categorical"));
  alpha.signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
}

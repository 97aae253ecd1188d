// The tables of deploy.md's worked example (examples/tabular/make-hospital-csv): as three hospitals
// export them, with a record number, another column order at each site, categories, gaps spelled three
// ways, a site without one class and one ward, a byte order mark and CRLF line ends, and a stray word.
// With the options the example gives they train; without one, the message names it. Real processes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "error/exit_code.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::run_meridian;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the worked example's hospital tables train with the options deploy.md gives, each missing one named",
          "[cli][data][process]") {
  meridian::tests::TempDir dir;
  const auto made = meridian::tests::run_command(
      {"python3", std::string(meridian::tests::source_dir()) + "/examples/tabular/make-hospital-csv",
       dir.path().string()});
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  const auto table = [&](const std::string& name) { return "'" + (dir.path() / (name + ".csv")).string() + "'"; };
  // What makes them messy is there.
  const std::string stmarys = bytes(dir.path() / "stmarys-train.csv");
  CHECK(stmarys.starts_with("\xEF\xBB\xBFmrn,"));
  CHECK(contains(stmarys, "\r\n"));
  const std::string riverside = bytes(dir.path() / "riverside-train.csv");
  CHECK_FALSE(contains(riverside, ",high,"));
  CHECK_FALSE(contains(riverside, "surgery"));
  CHECK(contains(bytes(dir.path() / "northclinic-train.csv"), ",pending,"));

  const std::string options =
      " --classes low,medium,high --label-column risk --ignore-columns mrn --categorical "
      "'sex,ward=icu|medicine|surgery'"
      " --model logreg --epochs 1 --threads 1 --json";
  for (const auto* site : {"stmarys", "riverside"}) {
    // Trained on one site's export, tested on another's, whose columns come in another order.
    const auto trained =
        run_meridian("train --train " + table(std::string(site) + "-train") + " --test " +
                     table(std::string(site) == "stmarys" ? "riverside-test" : "stmarys-test") + options);
    INFO(site << ":\n" << trained.output);
    CHECK(trained.exit_code == 0);
  }
  const auto stray = run_meridian("train --train " + table("northclinic-train") + options);
  INFO(stray.output);
  CHECK(stray.exit_code == meridian::error::kExitUser);
  CHECK(contains(stray.output, "column 2 (glucose): 'pending' is not a number, though the rows above hold numbers"));

  const auto no_label = run_meridian("train --train " + table("stmarys-train") + " --epochs 1");
  INFO(no_label.output);
  CHECK(no_label.exit_code == meridian::error::kExitUser);
  CHECK(contains(no_label.output,
                 "no label column 'label' in the header (columns: mrn, age, sex, ward, glucose, "
                 "systolic_bp, risk); name it with --label-column"));
  const auto no_ignore = run_meridian("train --train " + table("stmarys-train") + " --label-column risk --epochs 1");
  INFO(no_ignore.output);
  CHECK(no_ignore.exit_code == meridian::error::kExitUser);
  CHECK(contains(no_ignore.output, "leave it out with --ignore-columns mrn"));
}

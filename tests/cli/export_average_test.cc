// `meridian export --average`: the federation's model, the average of the sites' checkpoints as
// `meridian eval` takes it, exported in one command through the real binary.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "error/exit_code.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::TempDir;
using meridian::tests::run_meridian;

namespace {

std::string shell_path(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("export --average writes the average of the checkpoints; several without it are refused",
          "[cli][export][process]") {
  TempDir dir;
  const fs::path table = dir.path() / "t.csv";
  {
    std::ofstream out(table);
    out << "age,glucose,label\n";
    for (int i = 0; i < 24; ++i) out << 30 + i % 13 << ',' << 90 + (i * 7) % 29 << ',' << i % 2 << '\n';
  }
  for (const char* seed : {"1", "2"}) {
    const auto trained = run_meridian("train --train " + shell_path(table) + " --model logreg --epochs 1 --batch 8 " +
                                      "--seed " + seed + " --save " + shell_path(dir.path() / (std::string(seed) + ".mrdn")));
    INFO(trained.output);
    REQUIRE(trained.exit_code == 0);
  }
  const std::string a = shell_path(dir.path() / "1.mrdn"), b = shell_path(dir.path() / "2.mrdn");
  auto exported = [&](const std::string& args, const std::string& out) {
    const auto r = run_meridian("export " + args + " --format safetensors --out " + shell_path(dir.path() / out));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return meridian::tests::file_contents(dir.path() / out);
  };
  const auto one = exported(a, "a.safetensors");
  CHECK(exported("--average " + a + " " + a, "aa.safetensors") == one);
  const auto both = exported("--average " + a + " " + b, "ab.safetensors");
  CHECK(both != one);
  CHECK(both != exported(b, "b.safetensors"));

  const auto refused = run_meridian("export " + a + " " + b + " --format onnx --out " +
                                    shell_path(dir.path() / "x.onnx"));
  INFO(refused.output);
  CHECK(refused.exit_code == meridian::error::kExitUser);
  CHECK(refused.output.find("2 checkpoints given: add --average") != std::string::npos);
}

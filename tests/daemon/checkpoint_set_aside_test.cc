// A site whose checkpoints cannot be used says so in one line and keeps the files, out of rotation, for
// the operator: a real `meridian start` on a checkpoint directory with a damaged checkpoint.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::file_contents;
using meridian::tests::StartArgs;

namespace {

StartArgs one_site(const std::string& epochs) {
  return StartArgs("solo").set("--algo", "local").set("--epochs", epochs).set("--seed", 7).set("--eval-every", 1000000);
}

}  // namespace

TEST_CASE("a site whose only checkpoint is damaged starts fresh, says why, and keeps the file aside",
          "[daemon][checkpoint][process]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  const fs::path run = dir.path() / "solo";
  fs::path damaged;
  std::string damaged_bytes;
  {
    SiteProcess first(run, one_site("0.02"));
    INFO(first.log());
    REQUIRE(first.wait_exit() == 0);
    const auto files = first.checkpoints();
    REQUIRE(files.size() == 1);  // the final checkpoint
    damaged = files.front();
    damaged_bytes = file_contents(damaged);
    REQUIRE(damaged_bytes.size() > 1000);
    damaged_bytes[damaged_bytes.size() / 2] ^= 0x40;  // a parameter byte: only the checksum can tell
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << damaged_bytes;
  }
  SiteProcess again(run, one_site("0.02"));
  INFO(again.log());
  REQUIRE(again.wait_exit() == 0);
  const std::string log = again.log();
  CHECK(log.find("no valid checkpoint in " + (run / "checkpoints").string() +
                 " (newest: " + damaged.filename().string() + ", checksum mismatch") != std::string::npos);
  CHECK(log.find("); starting fresh") != std::string::npos);
  CHECK(log.find("resuming from") == std::string::npos);
  // The damaged file is kept byte for byte beside the new run's checkpoint, which replaced nothing.
  const fs::path kept = damaged.string() + ".set-aside";
  REQUIRE(fs::exists(kept));
  CHECK(file_contents(kept) == damaged_bytes);
  CHECK(log.find("kept " + damaged.string() + " as " + kept.string()) != std::string::npos);
  CHECK(again.checkpoints().size() == 1);
}

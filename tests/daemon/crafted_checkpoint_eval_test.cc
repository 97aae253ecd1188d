// `meridian eval` on a checkpoint another site could have crafted: a valid checksum and a model
// fingerprint that declares a layer 2^61 wide. Unchecked, the layer sizes wrap around to a 2-parameter
// buffer that the model then writes far past. The real binary must refuse the file with an error that
// names it and the bound, and exit as for any bad input (not by a signal).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "error/exit_code.h"
#include "tests/models/data/image_bytes.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

TEST_CASE("meridian eval refuses a checkpoint whose fingerprint declares a 2^61-wide layer",
          "[daemon][checkpoint][process]") {
  meridian::tests::TempDir dir;
  // The test set: 8×8 grayscale images of two classes, so the model's input is 1×8×8 = 64 features.
  for (const char* name : {"dark", "bright"}) {
    fs::create_directories(dir.path() / "test" / name);
    for (int i = 0; i < 2; ++i) {
      meridian::tests::write_png((dir.path() / "test" / name / ("img" + std::to_string(i) + ".png")).string(), 8, 8,
                                   1, std::vector<unsigned char>(64, name[0] == 'd' ? 20 : 230));
    }
  }
  // Hidden widths 2^61 and 5·2^61: 64·2^61 + 2^61, then 2^61 + 1 times 5·2^61, then 2·(5·2^61 + 1) sum
  // to 2 modulo 2^64, which is the parameter count the fingerprint states and the file holds.
  const std::string w1 = "2305843009213693952", w2 = "11529215046068469760";
  const std::vector<float> parameters{0.5f, -0.5f};
  meridian::daemon::CheckpointView view;
  view.parameters = parameters;
  view.model_fingerprint = "mlp|in=1x8x8|flatten|linear(64->" + w1 + ")|relu|linear(" + w1 + "->" + w2 +
                           ")|relu|linear(" + w2 + "->2)|classes=2|params=2";
  view.algorithm = "sgp";
  const auto checkpoint = dir.path() / "crafted.ckpt";
  REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(checkpoint, view));
  REQUIRE(fs::file_size(checkpoint) < 512);  // a few hundred bytes

  const auto r = meridian::tests::run_meridian("eval --checkpoint '" + checkpoint.string() + "' --test '" +
                                               (dir.path() / "test").string() + "' --classes dark,bright");
  INFO(r.output);
  CHECK(r.exit_code == meridian::error::kExitUser);
  CHECK(r.output.find(checkpoint.string()) != std::string::npos);
  CHECK(r.output.find("linear(64->" + w1 + ")") != std::string::npos);
  CHECK(r.output.find("more than 268435456") != std::string::npos);  // models::kMaxModelParameters
}

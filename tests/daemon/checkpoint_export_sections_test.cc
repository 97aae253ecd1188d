// The checkpoint sections an exported model needs (daemon/checkpoint/checkpoint.h): the model's state, the input
// standardization and a model file's text round-trip, and a checkpoint without them (as written before
// they existed) still reads, with the sections empty.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "tests/support/temp_dir.h"

using meridian::daemon::CheckpointView;
using meridian::daemon::read_checkpoint_file;
using meridian::daemon::write_checkpoint_file;

TEST_CASE("model state, input standardization and model file text round-trip in a checkpoint",
          "[unit][checkpoint][export]") {
  meridian::tests::TempDir tmp;
  const std::vector<float> parameters{1.0f, 2.0f, 3.0f}, state{0.5f, -0.5f}, mean{10.0f, 20.0f}, stddev{2.0f, 4.0f};
  CheckpointView view;
  view.parameters = parameters;
  view.model_fingerprint = "m|...";
  view.algorithm = "train";
  view.model_state = state;
  view.input_mean = mean;
  view.input_stddev = stddev;
  view.model_file = "model m\nlinear classes\n";
  REQUIRE_FALSE(write_checkpoint_file(tmp.path() / "a.mrdn", view));
  const auto cp = read_checkpoint_file(tmp.path() / "a.mrdn");
  CHECK(cp.parameters == parameters);
  CHECK(cp.model_state == state);
  CHECK(cp.input_mean == mean);
  CHECK(cp.input_stddev == stddev);
  CHECK(cp.model_file == view.model_file);
  CHECK(cp == read_checkpoint_file(tmp.path() / "a.mrdn"));
}

TEST_CASE("a checkpoint without the export sections reads with them empty", "[unit][checkpoint][export]") {
  meridian::tests::TempDir tmp;
  const std::vector<float> parameters{1.0f, 2.0f};
  CheckpointView view;
  view.parameters = parameters;
  view.model_fingerprint = "m|...";
  view.algorithm = "sgp";
  REQUIRE_FALSE(write_checkpoint_file(tmp.path() / "old.mrdn", view));
  const auto old_size = std::filesystem::file_size(tmp.path() / "old.mrdn");
  // Empty sections are not written, so the file above has the layout of a checkpoint from before them;
  // a filled one adds a section.
  view.model_file = "x";
  REQUIRE_FALSE(write_checkpoint_file(tmp.path() / "new.mrdn", view));
  CHECK(std::filesystem::file_size(tmp.path() / "new.mrdn") > old_size);
  const auto cp = read_checkpoint_file(tmp.path() / "old.mrdn");
  CHECK(cp.parameters == parameters);
  CHECK(cp.model_state.empty());
  CHECK(cp.input_mean.empty());
  CHECK(cp.input_stddev.empty());
  CHECK(cp.model_file.empty());
}

// The averaged model of several checkpoints (`meridian eval` of several, simulate's "accuracy"): its
// normalization statistics are the mean of the checkpoints' as its parameters are (daemon/checkpoint/checkpoint_model.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "tests/support/temp_dir.h"

namespace {

// 64 rows of 4 features in 3 classes, a deterministic pattern a small network separates in part.
meridian::models::data::Dataset tabular() {
  meridian::models::data::Dataset d;
  d.rows = 64;
  d.dim = 4;
  d.classes = 3;
  for (std::size_t i = 0; i < d.rows; ++i) {
    const auto label = static_cast<std::int32_t>(i % 3);
    d.labels.push_back(label);
    for (std::size_t j = 0; j < d.dim; ++j)
      d.features.push_back(static_cast<float>(std::sin(0.9 * static_cast<double>(i * d.dim + j)) + label * (j == 0)));
  }
  return d;
}

}  // namespace

TEST_CASE("the averaged model of several checkpoints averages their normalization statistics too",
          "[unit][checkpoint][norm-state]") {
  meridian::tests::TempDir tmp;
  const auto data = tabular();
  auto model = meridian::models::make_model("mlp-bn", meridian::models::Shape{4, 1, 1}, 3, {8},
                                            std::make_shared<meridian::models::CpuBackend>(1), 3);
  REQUIRE(model->state_count() > 0);
  std::vector<float> parameters(model->parameter_count());
  model->read_parameters(parameters);
  // Two sites with the same parameters and different running statistics.
  std::vector<std::vector<float>> states(2, std::vector<float>(model->state_count()));
  for (std::size_t i = 0; i < model->state_count(); ++i) {
    states[0][i] = 0.5f + 0.25f * static_cast<float>(i % 5);
    states[1][i] = 1.5f + 0.5f * static_cast<float>(i % 3);
  }
  std::vector<std::filesystem::path> files;
  for (std::size_t s = 0; s < 2; ++s) {
    meridian::daemon::CheckpointView view;
    view.parameters = parameters;
    view.model_fingerprint = model->fingerprint();
    view.algorithm = "dsync";
    view.model_state = states[s];
    files.push_back(tmp.path() / ("site" + std::to_string(s) + ".mrdn"));
    REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(files.back(), view));
  }
  const std::vector<meridian::daemon::Checkpoint> checkpoints{meridian::daemon::read_checkpoint_file(files[0]),
                                                              meridian::daemon::read_checkpoint_file(files[1])};
  const auto mean = meridian::daemon::average_model_state(checkpoints);
  REQUIRE(mean.size() == model->state_count());
  for (std::size_t i = 0; i < mean.size(); ++i) CHECK(mean[i] == (states[0][i] + states[1][i]) / 2);

  // The evaluation of both is that of the model with the mean statistics, not those of either site.
  const auto both = meridian::daemon::evaluate_checkpoints(files, data).evaluation;
  model->write_state(mean);
  const auto with_mean = model->evaluate(data);
  CHECK(both.loss == with_mean.loss);
  CHECK(both.accuracy == with_mean.accuracy);
  model->write_state(states[0]);
  CHECK(model->evaluate(data).loss != with_mean.loss);

  // Checkpoints whose states differ in size do not average.
  auto odd = checkpoints;
  odd[1].model_state.pop_back();
  CHECK_THROWS_AS(meridian::daemon::average_model_state(odd), meridian::daemon::CheckpointModelError);
}

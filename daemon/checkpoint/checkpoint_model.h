// Models rebuilt from checkpoints, for `meridian eval` and for `meridian simulate`'s averaged model:
// the architecture comes from the checkpoint's model fingerprint (kind, hidden widths, classes) or, for a
// model file, from the file's text stored in the checkpoint; the input shape from the dataset it is
// evaluated on; and the rebuilt model's fingerprint must equal the stored one. The model's state (batch
// norm's running statistics) comes from the checkpoint's state section, which must fit the model.
//
// Push-sum de-biasing: an sgp checkpoint holds the numerator x and the weight w; the model is z = x / w.
// Every function here applies it, so callers never see a biased numerator.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "error/error.h"
#include "models/data/dataset.h"
#include "models/model.h"

namespace meridian::daemon {

// A checkpoint that cannot be turned into a model for `data` (unknown architecture, a dataset of another
// shape, several checkpoints of different models); what() names the file and the problem.
class CheckpointModelError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// The model of `checkpoint` (its de-biased parameters), for inputs shaped like `data`. Throws
// CheckpointModelError when the fingerprint names an unknown architecture or does not fit `data`.
// `source` names the checkpoint in error messages.
std::unique_ptr<models::Model> model_from_checkpoint(const Checkpoint& checkpoint, const models::data::Dataset& data,
                                                     const std::string& source);

// The mean over `checkpoints` of their de-biased parameters z = x / w (the consensus model of a
// federation). Throws CheckpointModelError when the list is empty or the checkpoints belong to
// different models.
std::vector<float> average_parameters(std::span<const Checkpoint> checkpoints);

// The mean over `checkpoints` of their model state (batch norm's running statistics: a running mean and
// a running variance average like parameters; push-sum weights do not apply, sgp keeps them local).
// Empty for models without state. Throws CheckpointModelError when the list is empty or the checkpoints
// hold states of different sizes.
std::vector<float> average_model_state(std::span<const Checkpoint> checkpoints);

struct CheckpointEvaluation {
  models::Evaluation evaluation;  // on the test set
  std::size_t checkpoints = 0;    // how many were averaged
  std::string fingerprint;
  std::string algorithm;
  std::uint64_t step = 0;  // the newest step among them
};

// Reads every file (throws CheckpointError for an invalid one), averages their de-biased parameters
// and their model state, and evaluates the averaged model on `test`. One file evaluates that
// checkpoint alone.
CheckpointEvaluation evaluate_checkpoints(const std::vector<std::filesystem::path>& files,
                                          const models::data::Dataset& test);

}  // namespace meridian::daemon

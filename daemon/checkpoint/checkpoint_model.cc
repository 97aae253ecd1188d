#include "daemon/checkpoint/checkpoint_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "models/checked_size.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "models/model_file.h"

namespace meridian::daemon {
namespace {

// The fingerprint is "KIND|in=CxHxW|layer|layer|...|classes=N|params=P[|state=S]" (models/model.cc).

// The whole number text[begin, end), or nullopt when it is not one (or does not fit 64 bits).
std::optional<std::size_t> whole_number(const std::string& text, std::size_t begin, std::size_t end) {
  std::size_t value = 0;
  const auto [stop, error] = std::from_chars(text.data() + begin, text.data() + end, value);
  if (begin >= end || error != std::errc{} || stop != text.data() + end) return std::nullopt;
  return value;
}

// The number after the last "|KEY=" of the fingerprint, `absent` when there is none.
std::size_t fingerprint_count(const std::string& fp, const std::string& key, std::optional<std::size_t> absent,
                              const std::string& source) {
  const std::string field = "|" + key + "=";
  const auto at = fp.rfind(field);
  if (at == std::string::npos) {
    if (absent) return *absent;
    throw CheckpointModelError(source + ": the model fingerprint '" + fp + "' states no " + key + " count");
  }
  const auto begin = at + field.size(), end = std::min(fp.find('|', begin), fp.size());
  const auto value = whole_number(fp, begin, end);
  if (!value) {
    throw CheckpointModelError(source + ": the model fingerprint's " + key + " count '" +
                               fp.substr(begin, end - begin) + "' is not a whole number");
  }
  return *value;
}

// The sizes the fingerprint declares, checked before any model is built from it: as many parameters
// and state values as the checkpoint holds (so a model is never larger than its file), within the
// bound on any model (models/checked_size.h).
void check_declared_sizes(const Checkpoint& checkpoint, const std::string& source) {
  const std::string& fp = checkpoint.model_fingerprint;
  const std::size_t params = fingerprint_count(fp, "params", std::nullopt, source);
  const std::size_t state = fingerprint_count(fp, "state", 0, source);
  if (params > models::kMaxModelParameters || state > models::kMaxModelParameters) {
    throw CheckpointModelError(source + ": the model fingerprint declares " + std::to_string(params) +
                               " parameters and " + std::to_string(state) + " state values, more than the limit of " +
                               std::to_string(models::kMaxModelParameters));
  }
  if (params != checkpoint.parameters.size() || state != checkpoint.model_state.size()) {
    throw CheckpointModelError(source + ": the model fingerprint declares " + std::to_string(params) +
                               " parameters and " + std::to_string(state) + " state values, the checkpoint holds " +
                               std::to_string(checkpoint.parameters.size()) + " and " +
                               std::to_string(checkpoint.model_state.size()));
  }
}

// Hidden widths of an MLP: the outputs of every linear layer but the last, "linear(IN->OUT)".
std::vector<std::size_t> mlp_hidden_widths(const std::string& fingerprint, const std::string& source) {
  std::vector<std::size_t> outs;
  for (std::size_t pos = fingerprint.find("|linear("); pos != std::string::npos;
       pos = fingerprint.find("|linear(", pos + 1)) {
    const auto arrow = fingerprint.find("->", pos);
    const auto close = fingerprint.find(')', pos);
    if (arrow == std::string::npos || close == std::string::npos || arrow > close) break;
    const auto out = whole_number(fingerprint, arrow + 2, close);
    if (!out) {
      throw CheckpointModelError(source + ": the model fingerprint's layer width '" +
                                 fingerprint.substr(arrow + 2, close - arrow - 2) + "' is not a whole number");
    }
    outs.push_back(*out);
  }
  if (!outs.empty()) outs.pop_back();
  return outs;
}

void debias(std::span<float> params, double weight) {
  if (weight == 1.0) return;
  for (float& v : params) v = static_cast<float>(static_cast<double>(v) / weight);
}

}  // namespace

std::unique_ptr<models::Model> model_from_checkpoint(const Checkpoint& checkpoint, const models::data::Dataset& data,
                                                     const std::string& source) {
  const std::string& fp = checkpoint.model_fingerprint;
  const std::string kind = fp.substr(0, fp.find('|'));
  const auto& builtins = models::builtin_models();
  const bool builtin = std::find(builtins.begin(), builtins.end(), kind) != builtins.end();
  if (!builtin && checkpoint.model_file.empty()) {
    throw CheckpointModelError(source + ": the model fingerprint '" + fp +
                               "' names no built-in architecture and the checkpoint holds no model file");
  }
  if (!(checkpoint.push_sum_weight > 0) || !std::isfinite(checkpoint.push_sum_weight)) {
    throw CheckpointModelError(source + ": push-sum weight " + std::to_string(checkpoint.push_sum_weight) +
                               " is not positive");
  }
  check_declared_sizes(checkpoint, source);
  const models::Shape input =
      data.channels > 0 ? models::Shape{data.channels, data.height, data.width} : models::Shape{data.dim, 1, 1};
  const auto widths = kind == "mlp" || kind == "mlp-bn" ? mlp_hidden_widths(fp, source) : std::vector<std::size_t>{};
  auto backend = std::make_shared<models::CpuBackend>(1);
  std::unique_ptr<models::Model> model;
  try {
    // A model file's text names the model itself (its `model` line) or takes the kind as its name.
    model = builtin ? models::make_model(kind, input, data.classes, widths, backend, 1)
                    : models::parse_model_file(checkpoint.model_file, kind, input, data.classes, backend, 1);
  } catch (const error::UserError& e) {
    throw CheckpointModelError(source + ": cannot rebuild the model for this dataset: " + e.what());
  }
  if (model->fingerprint() != fp) {
    throw CheckpointModelError(source + ": the checkpoint's model '" + fp + "' does not fit this dataset (it gives '" +
                               model->fingerprint() + "')");
  }
  if (checkpoint.parameters.size() != model->parameters().size()) {
    throw CheckpointModelError(source + ": holds " + std::to_string(checkpoint.parameters.size()) +
                               " parameters, the model has " + std::to_string(model->parameters().size()));
  }
  std::copy(checkpoint.parameters.begin(), checkpoint.parameters.end(), model->parameters().begin());
  debias(model->parameters(), checkpoint.push_sum_weight);
  if (checkpoint.model_state.size() != model->state_count()) {
    throw CheckpointModelError(source + ": holds " + std::to_string(checkpoint.model_state.size()) +
                               " values of model state (batch norm's running statistics), the model has " +
                               std::to_string(model->state_count()));
  }
  if (model->state_count() > 0) model->write_state(checkpoint.model_state);
  return model;
}

std::vector<float> average_parameters(std::span<const Checkpoint> checkpoints) {
  if (checkpoints.empty()) throw CheckpointModelError("no checkpoint to average");
  const auto& first = checkpoints.front();
  // Sum in double: with many sites the float sum would depend on the order more than needed.
  std::vector<double> sum(first.parameters.size(), 0.0);
  for (const auto& cp : checkpoints) {
    if (cp.model_fingerprint != first.model_fingerprint || cp.parameters.size() != sum.size()) {
      throw CheckpointModelError("cannot average checkpoints of different models ('" + first.model_fingerprint +
                                 "' and '" + cp.model_fingerprint + "')");
    }
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += static_cast<double>(cp.parameters[i]) / cp.push_sum_weight;
  }
  std::vector<float> mean(sum.size());
  const double n = static_cast<double>(checkpoints.size());
  for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / n);
  return mean;
}

std::vector<float> average_model_state(std::span<const Checkpoint> checkpoints) {
  if (checkpoints.empty()) throw CheckpointModelError("no checkpoint to average");
  const auto& first = checkpoints.front();
  std::vector<double> sum(first.model_state.size(), 0.0);
  for (const auto& cp : checkpoints) {
    if (cp.model_state.size() != sum.size()) {
      throw CheckpointModelError("cannot average model states of " + std::to_string(sum.size()) + " and " +
                                 std::to_string(cp.model_state.size()) + " values ('" + first.model_fingerprint +
                                 "' and '" + cp.model_fingerprint + "')");
    }
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += static_cast<double>(cp.model_state[i]);
  }
  std::vector<float> mean(sum.size());
  const double n = static_cast<double>(checkpoints.size());
  for (std::size_t i = 0; i < sum.size(); ++i) mean[i] = static_cast<float>(sum[i] / n);
  return mean;
}

CheckpointEvaluation evaluate_checkpoints(const std::vector<std::filesystem::path>& files,
                                          const models::data::Dataset& test) {
  if (files.empty()) throw CheckpointModelError("no checkpoint given");
  std::vector<Checkpoint> checkpoints;
  for (const auto& f : files) checkpoints.push_back(read_checkpoint_file(f));
  CheckpointEvaluation out;
  // The first checkpoint rebuilds (and checks) the model; the others must match its fingerprint.
  auto model = model_from_checkpoint(checkpoints.front(), test, files.front().string());
  const auto mean = average_parameters(checkpoints);
  std::copy(mean.begin(), mean.end(), model->parameters().begin());
  // The averaged model's statistics are the mean of the sites', as its parameters are: what an exact
  // re-average of the federation would give every site (docs/algorithms.md, "Normalization statistics").
  const auto state = average_model_state(checkpoints);
  if (!state.empty()) model->write_state(state);
  out.evaluation = model->evaluate(test);
  out.checkpoints = checkpoints.size();
  out.fingerprint = checkpoints.front().model_fingerprint;
  out.algorithm = checkpoints.front().algorithm;
  for (const auto& cp : checkpoints) out.step = std::max<std::uint64_t>(out.step, cp.step);
  return out;
}

}  // namespace meridian::daemon

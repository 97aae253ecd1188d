#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "error/error.h"
#include "models/checked_size.h"
#include "models/split_mix64.h"

namespace meridian::models {

Model::Model(std::string kind, std::vector<std::unique_ptr<Layer>> layers, std::size_t classes,
             std::shared_ptr<Backend> backend, std::uint64_t seed)
    : kind_(std::move(kind)), classes_(classes), backend_(std::move(backend)) {
  if (layers.empty()) throw error::UserError("model " + kind_ + ": no layers");
  if (!backend_) throw error::InternalError("model " + kind_ + ": no backend");
  // Sizes first, checked against the model's bounds (models/checked_size.h) before any is multiplied
  // by a batch or allocated: the input, every layer's output and, summed, the activations of one sample.
  const auto sample_values = [&](Shape shape, const std::string& what) {
    return checked_product({shape.channels, shape.height, shape.width}, kMaxSampleValues,
                           "model " + kind_ + ": " + what);
  };
  const Shape input = layers.front()->input_shape();
  std::size_t activations = sample_values(input, "input " + input.to_string());
  for (const auto& layer : layers) {
    const std::string what = layer->describe() + " output " + layer->output_shape().to_string();
    activations = checked_sum(activations, sample_values(layer->output_shape(), what), kMaxSampleValues,
                              "model " + kind_ + ": activations of one sample at " + what);
  }
  for (std::size_t i = 1; i < layers.size(); ++i) {
    if (!(layers[i]->input_shape() == layers[i - 1]->output_shape()))
      throw error::UserError("model " + kind_ + ": layer " + std::to_string(i) + " (" + layers[i]->describe() +
                             ") expects " + layers[i]->input_shape().to_string() + " but gets " +
                             layers[i - 1]->output_shape().to_string());
  }
  if (layers.back()->output_shape().size() != classes_)
    throw error::UserError("model " + kind_ + ": last layer outputs " +
                           std::to_string(layers.back()->output_shape().size()) + " features, not " +
                           std::to_string(classes_) + " classes");
  // Lay every layer's parameters end to end in one buffer, then point each layer at its slice.
  // The state buffer the same way.
  std::size_t total = 0, state_total = 0;
  for (const auto& layer : layers) {
    offsets_.push_back(total);
    state_offsets_.push_back(state_total);
    total = checked_sum(total, layer->parameter_count(), kMaxModelParameters,
                        "model " + kind_ + ": parameters up to " + layer->describe());
    state_total = checked_sum(state_total, layer->state_count(), kMaxModelParameters,
                              "model " + kind_ + ": state values up to " + layer->describe());
  }
  parameters_ = BackendBuffer<float>(*backend_, total);
  gradients_ = BackendBuffer<float>(*backend_, total);
  state_ = BackendBuffer<float>(*backend_, state_total);
  replicas_.resize(1);
  replicas_[0].layers = std::move(layers);
  replicas_[0].gradients = gradients_.span();
  replicas_[0].state = state_.span();
  replicas_[0].activations.resize(replicas_[0].layers.size());
  for (std::size_t i = 0; i < layer_count(); ++i) {
    replicas_[0].layers[i]->bind(layer_parameters(i), layer_gradients(i));
    replicas_[0].layers[i]->bind_state(layer_state(i));
  }
  initialize(seed);
}

std::span<float> Model::layer_parameters(std::size_t i) {
  return parameters_.span().subspan(offsets_.at(i), layer(i).parameter_count());
}

std::span<float> Model::layer_gradients(std::size_t i) {
  return gradients_.span().subspan(offsets_.at(i), layer(i).parameter_count());
}

std::span<float> Model::layer_state(std::size_t i) {
  return state_.span().subspan(state_offsets_.at(i), layer(i).state_count());
}

void Model::read_state(std::span<float> host) const {
  if (host.size() != state_.size())
    throw error::InternalError("model " + kind_ + ": reading " + std::to_string(state_.size()) +
                               " state values into room for " + std::to_string(host.size()));
  backend_->copy_to_host(host.data(), state_.data(), host.size_bytes());
}

void Model::write_state(std::span<const float> host) {
  if (host.size() != state_.size())
    throw error::InternalError("model " + kind_ + ": writing " + std::to_string(host.size()) + " values into " +
                               std::to_string(state_.size()) + " state values");
  backend_->copy_from_host(state_.data(), host.data(), host.size_bytes());
}

void Model::read_parameters(std::span<float> host) const {
  if (host.size() != parameters_.size())
    throw error::InternalError("model " + kind_ + ": reading " + std::to_string(parameters_.size()) +
                               " parameters into room for " + std::to_string(host.size()));
  backend_->copy_to_host(host.data(), parameters_.data(), host.size_bytes());
}

void Model::write_parameters(std::span<const float> host) {
  if (host.size() != parameters_.size())
    throw error::InternalError("model " + kind_ + ": writing " + std::to_string(host.size()) + " values into " +
                               std::to_string(parameters_.size()) + " parameters");
  backend_->copy_from_host(parameters_.data(), host.data(), host.size_bytes());
}

void Model::initialize(std::uint64_t seed) {
  SplitMix64 random(seed);
  auto& layers = replicas_[0].layers;
  if (backend_->host_addressable()) {
    for (auto& layer : layers) layer->initialize(random);
  } else {
    // The initializers draw on the host: point the layers at host staging copies for the draw, upload
    // them, and point the layers back at the backend's buffers. The draws are the same as on the CPU, in
    // the same order.
    std::vector<float> staging(parameters_.size()), state_staging(state_.size());
    const std::span<float> host(staging), host_state(state_staging);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto slice = host.subspan(offsets_[i], layers[i]->parameter_count());
      layers[i]->bind(slice, slice);
      layers[i]->bind_state(host_state.subspan(state_offsets_[i], layers[i]->state_count()));
      layers[i]->initialize(random);
      layers[i]->bind(layer_parameters(i), layer_gradients(i));
      layers[i]->bind_state(layer_state(i));
    }
    write_parameters(staging);
    write_state(state_staging);
  }
  // The replicas' layers are clones made before: remake them so they carry the new draws (dropout seeds).
  if (replicas_.size() > 1) set_threads(replicas_.size());
}

void Model::set_threads(std::size_t threads) {
  if (threads == 0) throw error::UserError("model " + kind_ + ": threads must be >= 1");
  if (threads > 1 && !backend_->host_addressable())
    throw error::UserError("model " + kind_ + ": the " + backend_->name() +
                           " backend runs one layer chain; threads must be 1");
  pool_.reset();
  replicas_.resize(1);
  for (std::size_t r = 1; r < threads; ++r) {
    Replica replica;
    replica.own_gradients = BackendBuffer<float>(*backend_, gradients_.size());
    replica.gradients = replica.own_gradients.span();
    replica.own_state = BackendBuffer<float>(*backend_, state_.size());
    replica.state = replica.own_state.span();
    for (std::size_t i = 0; i < layer_count(); ++i) {
      replica.layers.push_back(layer(i).clone());
      replica.layers.back()->bind(layer_parameters(i),
                                  replica.gradients.subspan(offsets_[i], layer(i).parameter_count()));
      replica.layers.back()->bind_state(replica.state.subspan(state_offsets_[i], layer(i).state_count()));
      replica.layers.back()->set_stream(r);
    }
    replica.activations.resize(layer_count());
    replicas_.push_back(std::move(replica));
  }
  if (threads > 1) pool_ = std::make_unique<WorkerPool>(threads);
}

void Model::reserve(Replica& replica, std::size_t batch) {
  if (batch <= replica.reserved_batch) return;
  std::size_t widest = input_size();
  for (std::size_t i = 0; i < replica.layers.size(); ++i) {
    const std::size_t size = replica.layers[i]->output_shape().size();
    replica.activations[i].reserve(*backend_, batch * size);
    widest = std::max(widest, size);
    replica.layers[i]->reserve(*backend_, batch);
  }
  replica.grad_a.reserve(*backend_, batch * widest);
  replica.grad_b.reserve(*backend_, batch * widest);
  replica.reserved_batch = batch;
}

void Model::set_training(Replica& replica, bool training) {
  if (replica.training == training) return;
  for (auto& layer : replica.layers) layer->set_training(training);
  replica.training = training;
}

const float* Model::forward(Replica& replica, const float* x, std::size_t batch) {
  reserve(replica, batch);
  const float* in = x;
  for (std::size_t i = 0; i < replica.layers.size(); ++i) {
    replica.layers[i]->forward(*backend_, in, replica.activations[i].data(), batch);
    in = replica.activations[i].data();
  }
  return in;
}

float Model::forward_backward(Replica& replica, const float* x, const std::int32_t* labels, std::size_t batch) {
  set_training(replica, true);
  const float* logits = forward(replica, x, batch);
  const float loss = backend_->softmax_cross_entropy(batch, classes_, logits, labels, replica.grad_a.data());
  backward(replica, x, batch);
  return loss;
}

void Model::backward(Replica& replica, const float* x, std::size_t batch) {
  float* dout = replica.grad_a.data();
  float* din = replica.grad_b.data();
  for (std::size_t i = replica.layers.size(); i-- > 0;) {
    const float* in = i == 0 ? x : replica.activations[i - 1].data();
    // The first layer's input is data: nobody needs its gradient, so skip that GEMM.
    replica.layers[i]->backward(*backend_, in, replica.activations[i].data(), dout, i == 0 ? nullptr : din, batch);
    std::swap(dout, din);
  }
}

std::optional<std::string> Model::per_example_obstacle() {
  if (!backend_->host_addressable())
    return "per-example gradient clipping runs on the CPU backend only, not on " + backend_->name();
  for (std::size_t i = 0; i < layer_count(); ++i) {
    // Asking to stop tracking answers whether the layer can track at all, and changes nothing.
    if (replicas_[0].layers[i]->track_per_example_norms(nullptr)) continue;
    return "layer " + std::to_string(i) + " (" + layer(i).describe() +
           ") normalizes with statistics of the whole batch, so no example's gradient stands on its own; "
           "use group normalization (GroupNorm: group_norm in a --model-file) instead of batch norm";
  }
  return std::nullopt;
}

float Model::clipped_gradient_sum(Replica& replica, const float* x, const std::int32_t* labels, std::size_t batch,
                                  float clip) {
  set_training(replica, true);
  const float* logits = forward(replica, x, batch);
  const float loss = backend_->softmax_cross_entropy(batch, classes_, logits, labels, replica.grad_a.data());
  // The loss's gradient is that of the mean: row b times the batch size is example b's own.
  const std::size_t n = batch * classes_;
  replica.example_dlogits.resize(n);
  replica.squared_norms.assign(batch, 0.0);
  float* dlogits = replica.grad_a.data();
  for (std::size_t i = 0; i < n; ++i) replica.example_dlogits[i] = dlogits[i] * static_cast<float>(batch);
  std::copy(replica.example_dlogits.begin(), replica.example_dlogits.end(), dlogits);
  for (auto& layer : replica.layers) (void)layer->track_per_example_norms(replica.squared_norms.data());
  backward(replica, x, batch);
  for (auto& layer : replica.layers) (void)layer->track_per_example_norms(nullptr);
  // Second pass: example b's output gradient times min(1, C/‖g_b‖) gives Σ_b of the clipped gradients.
  for (std::size_t b = 0; b < batch; ++b) {
    const double norm = std::sqrt(replica.squared_norms[b]);
    const float factor = norm > clip ? static_cast<float>(clip / norm) : 1.0f;
    for (std::size_t c = 0; c < classes_; ++c)
      dlogits[b * classes_ + c] = replica.example_dlogits[b * classes_ + c] * factor;
  }
  backward(replica, x, batch);
  return loss;
}

float Model::clipped_gradient_sum(const float* x, const std::int32_t* labels, std::size_t batch, float clip) {
  if (batch == 0) throw error::InternalError("model " + kind_ + ": empty batch");
  if (!(clip > 0.0f) || !std::isfinite(clip))
    throw error::InternalError("model " + kind_ + ": clip " + std::to_string(clip) + " is not a positive number");
  if (const auto obstacle = per_example_obstacle()) throw error::UserError("model " + kind_ + ": " + *obstacle);
  const std::size_t parts = std::min(replicas_.size(), batch / 2);
  if (parts <= 1) return clipped_gradient_sum(replicas_[0], x, labels, batch, clip);
  auto first = [&](std::size_t r) { return batch * r / parts; };
  const std::size_t dim = input_size();
  pool_->run([&](std::size_t r) {
    if (r >= parts) return;
    const std::size_t begin = first(r), rows = first(r + 1) - begin;
    replicas_[r].loss = clipped_gradient_sum(replicas_[r], x + begin * dim, labels + begin, rows, clip);
  });
  // Sums, not means: gradients = Σ_r gradients_r, each thread adding up one slice of the buffer.
  const std::size_t n = gradients_.size();
  pool_->run([&](std::size_t t) {
    const std::size_t lo = n * t / replicas_.size(), hi = n * (t + 1) / replicas_.size();
    float* gradients = gradients_.data();
    for (std::size_t r = 1; r < parts; ++r) {
      const float* g = replicas_[r].gradients.data();
      for (std::size_t i = lo; i < hi; ++i) gradients[i] += g[i];
    }
  });
  double loss = 0.0;
  for (std::size_t r = 0; r < parts; ++r)
    loss += static_cast<double>(replicas_[r].loss) * static_cast<double>(first(r + 1) - first(r));
  return static_cast<float>(loss / static_cast<double>(batch));
}

const float* Model::stage_input(const float* x, std::size_t batch) {
  if (backend_->host_addressable()) return x;
  const std::size_t n = batch * input_size();
  input_.reserve(*backend_, n);
  backend_->copy_from_host(input_.data(), x, n * sizeof(float));
  return input_.data();
}

const std::int32_t* Model::stage_labels(const std::int32_t* labels, std::size_t batch) {
  if (backend_->host_addressable()) return labels;
  labels_.reserve(*backend_, batch);
  backend_->copy_from_host(labels_.data(), labels, batch * sizeof(std::int32_t));
  return labels_.data();
}

const float* Model::forward(const float* x, std::size_t batch) {
  if (batch == 0) throw error::InternalError("model " + kind_ + ": empty batch");
  set_training(replicas_[0], false);
  return forward(replicas_[0], stage_input(x, batch), batch);
}

float Model::forward_backward(const float* x, const std::int32_t* labels, std::size_t batch) {
  if (batch == 0) throw error::InternalError("model " + kind_ + ": empty batch");
  const std::size_t parts = std::min(replicas_.size(), batch / 2);
  if (parts <= 1) return forward_backward(replicas_[0], stage_input(x, batch), stage_labels(labels, batch), batch);
  // Rows [first(r), first(r + 1)) go to replica r; each computes the mean-loss gradient of its rows.
  auto first = [&](std::size_t r) { return batch * r / parts; };
  const std::size_t dim = input_size();
  // Every part starts from the model's state; the parts' updated states are averaged below.
  for (std::size_t r = 1; r < parts; ++r)
    backend_->copy(replicas_[r].state.data(), state_.data(), state_.size() * sizeof(float));
  pool_->run([&](std::size_t r) {
    if (r >= parts) return;
    const std::size_t begin = first(r), rows = first(r + 1) - begin;
    replicas_[r].loss = forward_backward(replicas_[r], x + begin * dim, labels + begin, rows);
  });
  // gradients = Σ_r (rows_r / batch) · gradients_r, each thread combining one slice of the buffer.
  const std::size_t n = gradients_.size();
  pool_->run([&](std::size_t t) {
    const std::size_t lo = n * t / replicas_.size(), hi = n * (t + 1) / replicas_.size();
    const float w0 = static_cast<float>(first(1) - first(0)) / static_cast<float>(batch);
    float* gradients = gradients_.data();
    for (std::size_t i = lo; i < hi; ++i) gradients[i] *= w0;
    for (std::size_t r = 1; r < parts; ++r) {
      const float w = static_cast<float>(first(r + 1) - first(r)) / static_cast<float>(batch);
      const float* g = replicas_[r].gradients.data();
      for (std::size_t i = lo; i < hi; ++i) gradients[i] += w * g[i];
    }
  });
  // state = Σ_r (rows_r / batch) · state_r: a running statistic that moved by momentum towards each
  // part's batch statistic ends where it would have moved towards their row-weighted mean.
  if (!state_.empty()) {
    const float w0 = static_cast<float>(first(1) - first(0)) / static_cast<float>(batch);
    float* state = state_.data();
    for (std::size_t i = 0; i < state_.size(); ++i) state[i] *= w0;
    for (std::size_t r = 1; r < parts; ++r) {
      const float w = static_cast<float>(first(r + 1) - first(r)) / static_cast<float>(batch);
      const float* s = replicas_[r].state.data();
      for (std::size_t i = 0; i < state_.size(); ++i) state[i] += w * s[i];
    }
  }
  double loss = 0.0;
  for (std::size_t r = 0; r < parts; ++r)
    loss += static_cast<double>(replicas_[r].loss) * static_cast<double>(first(r + 1) - first(r));
  return static_cast<float>(loss / static_cast<double>(batch));
}

void Model::predict(const float* x, std::size_t batch, std::int32_t* predictions) {
  const float* logits = forward(x, batch);
  if (backend_->host_addressable()) {
    backend_->argmax_rows(batch, classes_, logits, predictions);
    return;
  }
  predictions_.reserve(*backend_, batch);
  backend_->argmax_rows(batch, classes_, logits, predictions_.data());
  backend_->copy_to_host(predictions, predictions_.data(), batch * sizeof(std::int32_t));
}

Evaluation Model::evaluate(const data::Dataset& dataset, std::size_t chunk) {
  if (dataset.dim != input_size())
    throw error::UserError("model " + kind_ + " takes " + std::to_string(input_size()) +
                           " features per sample, the dataset has " + std::to_string(dataset.dim));
  if (dataset.classes > classes_)
    throw error::UserError("model " + kind_ + " has " + std::to_string(classes_) + " classes, the dataset " +
                           std::to_string(dataset.classes));
  Evaluation result;
  if (dataset.rows == 0) return result;
  Replica& replica = replicas_[0];
  set_training(replica, false);
  chunk = std::max<std::size_t>(1, std::min(chunk, dataset.rows));
  std::size_t correct = 0;
  double loss_sum = 0.0;
  for (std::size_t start = 0; start < dataset.rows; start += chunk) {
    const std::size_t n = std::min(chunk, dataset.rows - start);
    const float* logits = forward(replica, stage_input(dataset.row(start), n), n);
    const std::int32_t* labels = dataset.labels.data() + start;
    loss_sum += static_cast<double>(backend_->softmax_cross_entropy(n, classes_, logits, stage_labels(labels, n),
                                                                    replica.grad_a.data())) *
                static_cast<double>(n);
    if (host_predictions_.size() < n) host_predictions_.resize(n);
    if (backend_->host_addressable()) {
      backend_->argmax_rows(n, classes_, logits, host_predictions_.data());
    } else {
      predictions_.reserve(*backend_, n);
      backend_->argmax_rows(n, classes_, logits, predictions_.data());
      backend_->copy_to_host(host_predictions_.data(), predictions_.data(), n * sizeof(std::int32_t));
    }
    for (std::size_t i = 0; i < n; ++i) correct += host_predictions_[i] == labels[i] ? 1 : 0;
  }
  result.samples = dataset.rows;
  result.accuracy = static_cast<double>(correct) / static_cast<double>(dataset.rows);
  result.loss = loss_sum / static_cast<double>(dataset.rows);
  return result;
}

std::string Model::fingerprint() const {
  std::string text = kind_;
  text.append("|in=").append(input_shape().to_string());
  for (const auto& layer : replicas_[0].layers) text.append("|").append(layer->describe());
  text.append("|classes=").append(std::to_string(classes_));
  text.append("|params=").append(std::to_string(parameters_.size()));
  if (!state_.empty()) text.append("|state=").append(std::to_string(state_.size()));
  return text;
}

std::string Model::summary() const {
  // A flat shape reads as its width (784), an image as CxHxW.
  const auto size_text = [](const Shape& s) {
    return s.height == 1 && s.width == 1 ? std::to_string(s.channels) : s.to_string();
  };
  std::string sizes;
  std::string last;
  for (const auto& layer : replicas_[0].layers) {
    if (layer->parameter_count() == 0) continue;
    if (last.empty()) sizes = last = size_text(layer->input_shape());
    // A normalization keeps its input's size: one entry per size change.
    if (const auto out = size_text(layer->output_shape()); out != last) {
      sizes.append("-").append(out);
      last = out;
    }
  }
  if (sizes.empty()) sizes = size_text(input_shape()) + "-" + std::to_string(classes_);
  // Thousands separated, as people count: 235,146.
  const std::string digits = std::to_string(parameters_.size());
  std::string count;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) count += ',';
    count += digits[i];
  }
  return kind_ + " " + sizes + " (" + count + (parameters_.size() == 1 ? " parameter)" : " parameters)");
}

}  // namespace meridian::models

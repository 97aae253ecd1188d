#include "models/model.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "models/split_mix64.h"

namespace meridian::models {

Model::Model(std::string kind, std::vector<std::unique_ptr<Layer>> layers, std::size_t classes,
             std::shared_ptr<Backend> backend, std::uint64_t seed)
    : kind_(std::move(kind)), classes_(classes), backend_(std::move(backend)) {
  if (layers.empty()) throw std::invalid_argument("model " + kind_ + ": no layers");
  if (!backend_) throw std::invalid_argument("model " + kind_ + ": no backend");
  for (std::size_t i = 1; i < layers.size(); ++i) {
    if (!(layers[i]->input_shape() == layers[i - 1]->output_shape()))
      throw std::invalid_argument("model " + kind_ + ": layer " + std::to_string(i) + " (" +
                                  layers[i]->describe() + ") expects " + layers[i]->input_shape().to_string() +
                                  " but gets " + layers[i - 1]->output_shape().to_string());
  }
  if (layers.back()->output_shape().size() != classes_)
    throw std::invalid_argument("model " + kind_ + ": last layer outputs " +
                                std::to_string(layers.back()->output_shape().size()) + " features, not " +
                                std::to_string(classes_) + " classes");
  // Lay every layer's parameters end to end in one buffer, then point each layer at its slice.
  std::size_t total = 0;
  for (const auto& layer : layers) {
    offsets_.push_back(total);
    total += layer->parameter_count();
  }
  parameters_.assign(total, 0.0f);
  gradients_.assign(total, 0.0f);
  replicas_.resize(1);
  replicas_[0].layers = std::move(layers);
  replicas_[0].gradients = gradients_;
  replicas_[0].activations.resize(replicas_[0].layers.size());
  for (std::size_t i = 0; i < layer_count(); ++i) replicas_[0].layers[i]->bind(layer_parameters(i), layer_gradients(i));
  initialize(seed);
}

std::span<float> Model::layer_parameters(std::size_t i) {
  return std::span<float>(parameters_).subspan(offsets_.at(i), layer(i).parameter_count());
}

std::span<float> Model::layer_gradients(std::size_t i) {
  return std::span<float>(gradients_).subspan(offsets_.at(i), layer(i).parameter_count());
}

void Model::initialize(std::uint64_t seed) {
  SplitMix64 random(seed);
  for (auto& layer : replicas_[0].layers) layer->initialize(random);
}

void Model::set_threads(std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("model " + kind_ + ": threads must be >= 1");
  pool_.reset();
  replicas_.resize(1);
  for (std::size_t r = 1; r < threads; ++r) {
    Replica replica;
    replica.own_gradients.assign(gradients_.size(), 0.0f);
    replica.gradients = replica.own_gradients;
    for (std::size_t i = 0; i < layer_count(); ++i) {
      replica.layers.push_back(layer(i).clone());
      replica.layers.back()->bind(layer_parameters(i),
                                  replica.gradients.subspan(offsets_[i], layer(i).parameter_count()));
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
    replica.activations[i].resize(batch * size);
    widest = std::max(widest, size);
    replica.layers[i]->reserve(batch);
  }
  replica.grad_a.resize(batch * widest);
  replica.grad_b.resize(batch * widest);
  replica.reserved_batch = batch;
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
  const float* logits = forward(replica, x, batch);
  const float loss = backend_->softmax_cross_entropy(batch, classes_, logits, labels, replica.grad_a.data());
  float* dout = replica.grad_a.data();
  float* din = replica.grad_b.data();
  for (std::size_t i = replica.layers.size(); i-- > 0;) {
    const float* in = i == 0 ? x : replica.activations[i - 1].data();
    // The first layer's input is data: nobody needs its gradient, so skip that GEMM.
    replica.layers[i]->backward(*backend_, in, replica.activations[i].data(), dout, i == 0 ? nullptr : din, batch);
    std::swap(dout, din);
  }
  return loss;
}

const float* Model::forward(const float* x, std::size_t batch) {
  if (batch == 0) throw std::invalid_argument("model " + kind_ + ": empty batch");
  return forward(replicas_[0], x, batch);
}

float Model::forward_backward(const float* x, const std::int32_t* labels, std::size_t batch) {
  if (batch == 0) throw std::invalid_argument("model " + kind_ + ": empty batch");
  const std::size_t parts = std::min(replicas_.size(), batch / 2);
  if (parts <= 1) return forward_backward(replicas_[0], x, labels, batch);
  // Rows [first(r), first(r + 1)) go to replica r; each computes the mean-loss gradient of its rows.
  auto first = [&](std::size_t r) { return batch * r / parts; };
  const std::size_t dim = input_size();
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
    for (std::size_t i = lo; i < hi; ++i) gradients_[i] *= w0;
    for (std::size_t r = 1; r < parts; ++r) {
      const float w = static_cast<float>(first(r + 1) - first(r)) / static_cast<float>(batch);
      const float* g = replicas_[r].gradients.data();
      for (std::size_t i = lo; i < hi; ++i) gradients_[i] += w * g[i];
    }
  });
  double loss = 0.0;
  for (std::size_t r = 0; r < parts; ++r)
    loss += static_cast<double>(replicas_[r].loss) * static_cast<double>(first(r + 1) - first(r));
  return static_cast<float>(loss / static_cast<double>(batch));
}

void Model::predict(const float* x, std::size_t batch, std::int32_t* predictions) {
  const float* logits = forward(x, batch);
  backend_->argmax_rows(batch, classes_, logits, predictions);
}

Evaluation Model::evaluate(const data::Dataset& dataset, std::size_t chunk) {
  if (dataset.dim != input_size())
    throw std::invalid_argument("model " + kind_ + " takes " + std::to_string(input_size()) +
                                " features per sample, the dataset has " + std::to_string(dataset.dim));
  if (dataset.classes > classes_)
    throw std::invalid_argument("model " + kind_ + " has " + std::to_string(classes_) + " classes, the dataset " +
                                std::to_string(dataset.classes));
  Evaluation result;
  if (dataset.rows == 0) return result;
  Replica& replica = replicas_[0];
  chunk = std::max<std::size_t>(1, std::min(chunk, dataset.rows));
  std::size_t correct = 0;
  double loss_sum = 0.0;
  for (std::size_t start = 0; start < dataset.rows; start += chunk) {
    const std::size_t n = std::min(chunk, dataset.rows - start);
    const float* logits = forward(replica, dataset.row(start), n);
    const std::int32_t* labels = dataset.labels.data() + start;
    loss_sum += static_cast<double>(backend_->softmax_cross_entropy(n, classes_, logits, labels, replica.grad_a.data())) *
                static_cast<double>(n);
    if (predictions_.size() < n) predictions_.resize(n);
    backend_->argmax_rows(n, classes_, logits, predictions_.data());
    for (std::size_t i = 0; i < n; ++i) correct += predictions_[i] == labels[i] ? 1 : 0;
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
  return text;
}

}  // namespace meridian::models

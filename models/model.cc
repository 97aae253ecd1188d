#include "models/model.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace meridian::models {

Model::Model(std::string kind, std::vector<std::unique_ptr<Layer>> layers, std::size_t classes,
             std::shared_ptr<Backend> backend, std::uint64_t seed)
    : kind_(std::move(kind)), layers_(std::move(layers)), classes_(classes), backend_(std::move(backend)) {
  if (layers_.empty()) throw std::invalid_argument("model " + kind_ + ": no layers");
  if (!backend_) throw std::invalid_argument("model " + kind_ + ": no backend");
  for (std::size_t i = 1; i < layers_.size(); ++i) {
    if (!(layers_[i]->input_shape() == layers_[i - 1]->output_shape()))
      throw std::invalid_argument("model " + kind_ + ": layer " + std::to_string(i) + " (" +
                                  layers_[i]->describe() + ") expects " + layers_[i]->input_shape().to_string() +
                                  " but gets " + layers_[i - 1]->output_shape().to_string());
  }
  if (layers_.back()->output_shape().size() != classes_)
    throw std::invalid_argument("model " + kind_ + ": last layer outputs " +
                                std::to_string(layers_.back()->output_shape().size()) + " features, not " +
                                std::to_string(classes_) + " classes");
  // Lay every layer's parameters end to end in one buffer, then point each layer at its slice.
  std::size_t total = 0;
  for (const auto& layer : layers_) {
    offsets_.push_back(total);
    total += layer->parameter_count();
  }
  parameters_.assign(total, 0.0f);
  gradients_.assign(total, 0.0f);
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->bind(layer_parameters(i), layer_gradients(i));
  activations_.resize(layers_.size());
  initialize(seed);
}

std::span<float> Model::layer_parameters(std::size_t i) {
  return std::span<float>(parameters_).subspan(offsets_.at(i), layers_[i]->parameter_count());
}

std::span<float> Model::layer_gradients(std::size_t i) {
  return std::span<float>(gradients_).subspan(offsets_.at(i), layers_[i]->parameter_count());
}

void Model::initialize(std::uint64_t seed) {
  SplitMix64 random(seed);
  for (auto& layer : layers_) layer->initialize(random);
}

void Model::reserve(std::size_t batch) {
  if (batch <= reserved_batch_) return;
  std::size_t widest = input_size();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::size_t size = layers_[i]->output_shape().size();
    activations_[i].resize(batch * size);
    widest = std::max(widest, size);
    layers_[i]->reserve(batch);
  }
  grad_a_.resize(batch * widest);
  grad_b_.resize(batch * widest);
  predictions_.resize(batch);
  reserved_batch_ = batch;
}

const float* Model::forward(const float* x, std::size_t batch) {
  if (batch == 0) throw std::invalid_argument("model " + kind_ + ": empty batch");
  reserve(batch);
  const float* in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(*backend_, in, activations_[i].data(), batch);
    in = activations_[i].data();
  }
  return in;
}

float Model::forward_backward(const float* x, const std::int32_t* labels, std::size_t batch) {
  const float* logits = forward(x, batch);
  const float loss = backend_->softmax_cross_entropy(batch, classes_, logits, labels, grad_a_.data());
  float* dout = grad_a_.data();
  float* din = grad_b_.data();
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const float* in = i == 0 ? x : activations_[i - 1].data();
    // The first layer's input is data: nobody needs its gradient, so skip that GEMM.
    layers_[i]->backward(*backend_, in, activations_[i].data(), dout, i == 0 ? nullptr : din, batch);
    std::swap(dout, din);
  }
  return loss;
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
  chunk = std::max<std::size_t>(1, std::min(chunk, dataset.rows));
  std::size_t correct = 0;
  double loss_sum = 0.0;
  for (std::size_t start = 0; start < dataset.rows; start += chunk) {
    const std::size_t n = std::min(chunk, dataset.rows - start);
    const float* logits = forward(dataset.row(start), n);
    const std::int32_t* labels = dataset.labels.data() + start;
    loss_sum += static_cast<double>(backend_->softmax_cross_entropy(n, classes_, logits, labels, grad_a_.data())) *
                static_cast<double>(n);
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
  for (const auto& layer : layers_) text.append("|").append(layer->describe());
  text.append("|classes=").append(std::to_string(classes_));
  text.append("|params=").append(std::to_string(parameters_.size()));
  return text;
}

}  // namespace meridian::models

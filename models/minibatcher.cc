#include "models/minibatcher.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "error/error.h"

namespace meridian::models {

Minibatcher::Minibatcher(const data::Dataset& dataset, std::size_t batch, std::uint64_t seed)
    : dataset_(dataset), batch_(batch), random_(seed) {
  if (batch == 0) throw error::UserError("minibatcher: batch size must be >= 1");
  if (dataset.rows == 0) throw error::UserError("minibatcher: the dataset is empty");
  order_.resize(dataset.rows);
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  features_.resize(batch * dataset.dim);
  labels_.resize(batch);
  shuffle();
}

void Minibatcher::shuffle() {
  for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[random_.below(i)]);
  cursor_ = 0;
}

std::size_t Minibatcher::next() {
  if (cursor_ >= order_.size()) {
    shuffle();
    ++epoch_;
    last_size_ = 0;
    return 0;
  }
  const std::size_t n = std::min(batch_, order_.size() - cursor_);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t row = order_[cursor_ + i];
    std::memcpy(features_.data() + i * dataset_.dim, dataset_.row(row), dataset_.dim * sizeof(float));
    labels_[i] = dataset_.labels[row];
  }
  cursor_ += n;
  last_size_ = n;
  return n;
}

}  // namespace meridian::models

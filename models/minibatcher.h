// Cuts a dataset into shuffled mini-batches, epoch after epoch. Each epoch draws a new permutation
// from the seeded generator (Fisher–Yates), so the batch order is reproducible; rows are gathered into
// one batch buffer that is reused by every call (no per-step allocation). The last batch of an epoch
// may be smaller than `batch`.
//
// The dataset must outlive the minibatcher. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/data/dataset.h"
#include "models/split_mix64.h"

namespace meridian::models {

class Minibatcher {
 public:
  // Throws error::UserError for batch == 0 or an empty dataset.
  Minibatcher(const data::Dataset& dataset, std::size_t batch, std::uint64_t seed);

  // Gathers the next batch of the current epoch and returns its size; returns 0 once the epoch is
  // exhausted, after which the next call starts a new epoch with a fresh permutation.
  std::size_t next();
  const float* features() const { return features_.data(); }     // (size, dim)
  const std::int32_t* labels() const { return labels_.data(); }  // (size)
  std::size_t epoch() const { return epoch_; }                   // 0-based epoch of the last batch
  // The dataset rows of the last batch, in batch order: (size).
  std::span<const std::size_t> rows() const { return {order_.data() + cursor_ - last_size_, last_size_}; }
  std::size_t batches_per_epoch() const { return (dataset_.rows + batch_ - 1) / batch_; }

 private:
  void shuffle();

  const data::Dataset& dataset_;
  std::size_t batch_;
  SplitMix64 random_;
  std::vector<std::size_t> order_;
  std::size_t cursor_ = 0;
  std::size_t last_size_ = 0;  // rows of the last batch, ending at cursor_
  std::size_t epoch_ = 0;
  std::vector<float> features_;
  std::vector<std::int32_t> labels_;
};

}  // namespace meridian::models

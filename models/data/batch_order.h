// The order in which a trainer visits its rows: each epoch is a fresh permutation of 0..rows-1 drawn
// from (seed, epoch), consumed in batches. The position (epoch, offset) is all a checkpoint needs: a
// BatchOrder rebuilt from the same rows, seed and position continues with exactly the same batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace meridian::models::data {

struct BatchPosition {
  std::uint64_t epoch = 0;
  std::size_t offset = 0;  // rows of this epoch's permutation already handed out
  bool operator==(const BatchPosition&) const = default;
};

// Not thread-safe: owned by the trainer thread.
class BatchOrder {
 public:
  // Starts at `start`. Throws error::UserError when rows == 0 or start.offset > rows.
  BatchOrder(std::size_t rows, std::uint64_t seed, BatchPosition start = {});

  // The next up to `batch` row indices of the current epoch (fewer only for the last batch of an
  // epoch: batches never straddle epochs, so every row is seen exactly once per epoch). When the
  // epoch is used up, moves to the next epoch first. The span stays valid until the next call.
  // Requires batch > 0 (error::UserError otherwise).
  std::span<const std::size_t> next(std::size_t batch);

  // Where the next call to next() starts. An offset equal to rows means "epoch finished".
  BatchPosition position() const { return position_; }

  // The permutation of the current epoch.
  std::span<const std::size_t> epoch_order() const { return order_; }

  std::size_t rows() const { return order_.size(); }

  // The permutation of `epoch` for these rows and seed, without changing any state.
  static std::vector<std::size_t> permutation(std::size_t rows, std::uint64_t seed, std::uint64_t epoch);

 private:
  void start_epoch(std::uint64_t epoch);

  std::uint64_t seed_;
  BatchPosition position_;
  std::vector<std::size_t> order_;  // (rows), reused across epochs
};

}  // namespace meridian::models::data

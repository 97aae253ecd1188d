#include "models/data/batch_order.h"

#include <numeric>
#include <stdexcept>
#include <string>

#include "error/error.h"
#include "models/data/seeded_random.h"

namespace meridian::models::data {

namespace {

// Each epoch shuffles the identity afresh from its own derived seed (rather than reshuffling the
// previous epoch's order), so any epoch can be rebuilt directly when resuming.
void fill_permutation(std::vector<std::size_t>& order, std::uint64_t seed, std::uint64_t epoch) {
  std::iota(order.begin(), order.end(), std::size_t{0});
  SeededRandom rng(SeededRandom::derive(seed, epoch));
  rng.shuffle(std::span(order));
}

}  // namespace

BatchOrder::BatchOrder(std::size_t rows, std::uint64_t seed, BatchPosition start)
    : seed_(seed), position_(start), order_(rows) {
  if (rows == 0) throw error::UserError("batch order: the dataset has no rows");
  if (start.offset > rows) {
    throw error::UserError("batch order: position offset " + std::to_string(start.offset) + " is beyond the " +
                           std::to_string(rows) + " rows of an epoch");
  }
  fill_permutation(order_, seed_, position_.epoch);
}

void BatchOrder::start_epoch(std::uint64_t epoch) {
  position_ = {epoch, 0};
  fill_permutation(order_, seed_, epoch);
}

std::span<const std::size_t> BatchOrder::next(std::size_t batch) {
  if (batch == 0) throw error::UserError("batch order: batch size must be at least 1");
  if (position_.offset >= order_.size()) start_epoch(position_.epoch + 1);
  const std::size_t n = std::min(batch, order_.size() - position_.offset);
  const std::span<const std::size_t> out(order_.data() + position_.offset, n);
  position_.offset += n;
  return out;
}

std::vector<std::size_t> BatchOrder::permutation(std::size_t rows, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(rows);
  fill_permutation(order, seed, epoch);
  return order;
}

}  // namespace meridian::models::data

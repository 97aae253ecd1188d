// Sizes computed from numbers Meridian did not choose (model files, checkpoint fingerprints, --widths,
// data file headers): products and sums that are refused when they pass a bound instead of wrapping,
// and the bounds every model keeps (docs/models.md, "Size limits").
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>

#include "error/error.h"

namespace meridian::models {

// The most parameters a model may have (and, separately, the most values of state): 2^28 floats, 1 GiB.
// Training holds about four times that (gradients, optimizer state, a copy in flight).
inline constexpr std::size_t kMaxModelParameters = std::size_t{1} << 28;
// The most values one sample may have at a layer's output, summed over the model's layers (so the
// activations of one sample stay within 256 MiB), and so the most features a sample can have.
inline constexpr std::size_t kMaxSampleValues = std::size_t{1} << 26;

// The most classes a dataset may have (ImageNet-21k has 21,841): a label names its class by number, so
// a label file cannot make a reader list billions of classes.
inline constexpr std::size_t kMaxClasses = std::size_t{1} << 16;

// The product of `factors` when it is at most `limit`; nullopt when it is larger or overflows.
inline std::optional<std::size_t> product_within(std::initializer_list<std::size_t> factors, std::size_t limit) {
  std::size_t product = 1;
  for (std::size_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  if (product > limit) return std::nullopt;
  return product;
}

// a + b when it is at most `limit`; nullopt when it is larger or overflows.
inline std::optional<std::size_t> sum_within(std::size_t a, std::size_t b, std::size_t limit) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum) || sum > limit) return std::nullopt;
  return sum;
}

// The product of `factors`, which must be at most `limit`; otherwise throws Error (error::UserError or
// one derived from it) "WHAT: A x B x C is more than LIMIT", WHAT naming the source and the quantity.
template <typename Error = error::UserError>
std::size_t checked_product(std::initializer_list<std::size_t> factors, std::size_t limit, const std::string& what) {
  if (const auto product = product_within(factors, limit)) return *product;
  std::string text;
  for (std::size_t f : factors) text += (text.empty() ? "" : " x ") + std::to_string(f);
  throw Error(what + ": " + text + " is more than " + std::to_string(limit));
}

// a + b, which must be at most `limit`; otherwise throws Error "WHAT: A + B is more than LIMIT".
template <typename Error = error::UserError>
std::size_t checked_sum(std::size_t a, std::size_t b, std::size_t limit, const std::string& what) {
  if (const auto sum = sum_within(a, b, limit)) return *sum;
  throw Error(what + ": " + std::to_string(a) + " + " + std::to_string(b) + " is more than " + std::to_string(limit));
}

}  // namespace meridian::models

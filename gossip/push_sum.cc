#include "gossip/push_sum.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::gossip {

PushSum::PushSum(DelayedMixingConfig config, MixChannel& channel, std::span<float> model, PushSumStepScale scale)
    : model_(model), x_(model.begin(), model.end()), scale_(scale), mixing_(config, channel, x_, {}, &w_) {}

namespace {

// The function v ↦ v / w that refresh_model() applies to each element of x, in the form it takes for
// this w: kind 0 when w is no float (the double quotient rounded to float), 1 for w = 1 (x / 1 is x),
// 2 for any other float w. w is a float on the exponential graph of a synchronous run (sums of dyadic
// shares); then the float quotient has the bits of the double quotient rounded to float: double
// rounding is innocuous for a quotient of two floats, since 53 >= 2·24 + 2 bits (Figueroa, 1995), and
// the float division does twice the elements per instruction and needs no conversions. In an overlap
// run w is mostly no float and every element takes a double division. It stays one: on an AMD Zen 3
// core the AVX2 loop divides at about 0.38 ns per element; x · (1/w) takes 0.25 ns but misses some
// quotients next to a float rounding boundary, and Markstein's FMA correction q + (x − q·w)·(1/w) is
// exact only from a q within an ulp, which x · (1/w) is not known to be: once it takes 0.32 ns,
// twice (the second from a faithful q) 0.42 ns. Even the inexact product would save only about 0.1 ms
// of a 25 ms step (4 sites, --widths 512,256 --batch 512, overlap).
int quotient_kind(double w) {
  const float wf = static_cast<float>(w);
  if (static_cast<double>(wf) != w) return 0;
  return wf == 1.0f ? 1 : 2;
}

// x86-64 only: other targets (an arm64 edge box) have no such clone and build the loops once.
#if defined(__x86_64__)
#define MERIDIAN_AVX2_CLONE [[gnu::target_clones("avx2", "default")]]
#else
#define MERIDIAN_AVX2_CLONE
#endif

// The two loops that divide, compiled once more for AVX2 (twice the elements per division instruction),
// which the loader picks where the CPU has it. Division, conversion and subtraction are single IEEE
// operations in every clone, so each gives the same bits, and sites on different CPUs agree. There is
// no AVX-512 clone: with it the compiler may fuse x − f·u into an FMA, which rounds once instead of twice.

// z[0, n) ← x / w.
MERIDIAN_AVX2_CLONE
void write_quotients(const float* x, double w, float* z, std::size_t n) {
  const float wf = static_cast<float>(w);
  switch (quotient_kind(w)) {
    case 0:
      for (std::size_t i = 0; i < n; ++i) z[i] = static_cast<float>(x[i] / w);
      break;
    case 1: std::copy(x, x + n, z); break;
    default:
      for (std::size_t i = 0; i < n; ++i) z[i] = x[i] / wf;
  }
}

// x[0, n) ← x − f·(x / w − z): the push-sum update with the model before the step recomputed as
// write_quotients() wrote it, and z the model after the step.
MERIDIAN_AVX2_CLONE
void subtract_displacement(float* x, const float* z, double w, float f, std::size_t n) {
  const float wf = static_cast<float>(w);
  switch (quotient_kind(w)) {
    case 0:
      for (std::size_t i = 0; i < n; ++i) {
        const float update = static_cast<float>(x[i] / w) - z[i];
        x[i] -= f * update;
      }
      break;
    case 1:
      for (std::size_t i = 0; i < n; ++i) {
        const float update = x[i] - z[i];
        x[i] -= f * update;
      }
      break;
    default:
      for (std::size_t i = 0; i < n; ++i) {
        const float update = x[i] / wf - z[i];
        x[i] -= f * update;
      }
  }
}

}  // namespace

void PushSum::refresh_model(std::size_t begin, std::size_t end) {
  write_quotients(x_.data() + begin, w_, model_.data() + begin, end - begin);
}

void PushSum::step_with(std::uint64_t k, const std::function<void(std::size_t, std::size_t)>& update) {
  DelayedMixing::StepPass pass{update, [this](std::size_t begin, std::size_t end) { refresh_model(begin, end); }};
  mixing_.after_step(k, pass);
}

void PushSum::step(std::uint64_t k, std::span<const float> update) {
  if (update.size() != x_.size())
    throw error::InternalError("sgp: update has " + std::to_string(update.size()) + " elements, model " +
                               std::to_string(x_.size()));
  // s = w without shares in flight, so that z = x / w moves by the update itself whatever w is; with
  // w = 1 the product is exact and this is x ← x − update. With shares in flight s = w·g
  // (gossip/push_sum_step_scale.h).
  const float f = update_factor();
  float* x = x_.data();
  const float* u = update.data();
  step_with(k, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) x[i] -= f * u[i];
  });
}

void PushSum::step(std::uint64_t k, std::span<const float> before, std::span<const float> after) {
  if (before.size() != x_.size() || after.size() != x_.size())
    throw error::InternalError("sgp: the model before and after the step have " + std::to_string(before.size()) +
                               " and " + std::to_string(after.size()) + " elements, the numerator " +
                               std::to_string(x_.size()));
  const float f = update_factor();
  float* x = x_.data();
  const float* b = before.data();
  const float* a = after.data();
  // `after` may be the model buffer, which the pass rewrites: each block is read here before it is.
  step_with(k, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const float update = b[i] - a[i];
      x[i] -= f * update;
    }
  });
}

void PushSum::step_in_place(std::uint64_t k) {
  const float f = update_factor();
  const double w = w_;  // the weight the model was last written with; the pass changes w_
  float* x = x_.data();
  const float* z = model_.data();
  step_with(
      k, [&](std::size_t begin, std::size_t end) { subtract_displacement(x + begin, z + begin, w, f, end - begin); });
}

void PushSum::restore(std::span<const float> numerator, double weight, double weight_average) {
  if (numerator.size() != x_.size())
    throw error::UserError("sgp: checkpoint numerator has " + std::to_string(numerator.size()) + " elements, model " +
                           std::to_string(x_.size()));
  if (!std::isfinite(weight) || weight <= 0.0)
    throw error::UserError("sgp: checkpoint push-sum weight " + std::to_string(weight) + " is not positive");
  scale_.resume(weight_average);
  std::copy(numerator.begin(), numerator.end(), x_.begin());
  w_ = weight;
  refresh_model();
}

void PushSum::finish() {
  mixing_.finish();
  refresh_model();
}

}  // namespace meridian::gossip

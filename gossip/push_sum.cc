#include "gossip/push_sum.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace meridian::gossip {

PushSum::PushSum(DelayedMixingConfig config, MixChannel& channel, std::span<float> model)
    : model_(model), x_(model.begin(), model.end()), mixing_(config, channel, x_, {}, &w_) {}

namespace {

// Calls f with the function v ↦ v / w that refresh_model() applies to each element of x, in the form
// it takes for this w. w is usually a float, as on the exponential graph (sums of dyadic shares). Then
// the float quotient has the bits of the double quotient rounded to float: double rounding is
// innocuous for a quotient of two floats, since 53 >= 2·24 + 2 bits (Figueroa, 1995). The float
// division does twice the elements per instruction and needs no conversions; x / 1 is x.
template <typename F>
void with_quotient(double w, F&& f) {
  const float wf = static_cast<float>(w);
  if (static_cast<double>(wf) != w) {
    f([w](float v) { return static_cast<float>(v / w); });
  } else if (wf == 1.0f) {
    f([](float v) { return v; });
  } else {
    f([wf](float v) { return v / wf; });
  }
}

}  // namespace

void PushSum::refresh_model(std::size_t begin, std::size_t end) {
  const float* x = x_.data();
  float* z = model_.data();
  with_quotient(w_, [&](auto quotient) {
    for (std::size_t i = begin; i < end; ++i) z[i] = quotient(x[i]);
  });
}

void PushSum::step_with(std::uint64_t k, const std::function<void(std::size_t, std::size_t)>& update) {
  DelayedMixing::StepPass pass{update, [this](std::size_t begin, std::size_t end) { refresh_model(begin, end); }};
  mixing_.after_step(k, pass);
}

void PushSum::step(std::uint64_t k, std::span<const float> update) {
  if (update.size() != x_.size())
    throw std::invalid_argument("sgp: update has " + std::to_string(update.size()) + " elements, model " +
                                std::to_string(x_.size()));
  // Scaled by w so that z = x / w moves by the update itself whatever w is (see push_sum.h); with w = 1
  // the product is exact and this is x ← x − update.
  const float f = update_factor();
  float* x = x_.data();
  const float* u = update.data();
  step_with(k, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) x[i] -= f * u[i];
  });
}

void PushSum::step(std::uint64_t k, std::span<const float> before, std::span<const float> after) {
  if (before.size() != x_.size() || after.size() != x_.size())
    throw std::invalid_argument("sgp: the model before and after the step have " + std::to_string(before.size()) +
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
  step_with(k, [&](std::size_t begin, std::size_t end) {
    with_quotient(w, [&](auto quotient) {
      for (std::size_t i = begin; i < end; ++i) {
        const float update = quotient(x[i]) - z[i];
        x[i] -= f * update;
      }
    });
  });
}

void PushSum::restore(std::span<const float> numerator, double weight) {
  if (numerator.size() != x_.size())
    throw std::invalid_argument("sgp: checkpoint numerator has " + std::to_string(numerator.size()) +
                                " elements, model " + std::to_string(x_.size()));
  if (!std::isfinite(weight) || weight <= 0.0)
    throw std::invalid_argument("sgp: checkpoint push-sum weight " + std::to_string(weight) + " is not positive");
  std::copy(numerator.begin(), numerator.end(), x_.begin());
  w_ = weight;
  refresh_model();
}

void PushSum::finish() {
  mixing_.finish();
  refresh_model();
}

}  // namespace meridian::gossip

// The per-element math shared by the CPU backend and the CUDA kernels (models/elementwise_math.h), called
// directly on the host against values worked out by hand, so the CPU build checks the very functions the
// GPU runs.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/elementwise_math.h"

namespace math = meridian::models::math;

TEST_CASE("relu and its gradient", "[models][math][unit]") {
  CHECK(math::relu(2.5f) == 2.5f);
  CHECK(math::relu(-1.0f) == 0.0f);
  CHECK(math::relu(0.0f) == 0.0f);
  CHECK(math::relu_backward(0.5f, 3.0f) == 3.0f);
  CHECK(math::relu_backward(0.0f, 3.0f) == 0.0f);
}

TEST_CASE("softmax cross-entropy of one row", "[models][math][unit]") {
  const float logits[3] = {1.0f, 2.0f, 3.0f};
  float d[3];
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const float loss = math::softmax_cross_entropy_row(logits, 3, 1, 0.5f, d);
  CHECK(loss == Approx(std::log(z) - 2.0).epsilon(1e-6));
  CHECK(d[0] == Approx(0.5 * std::exp(1.0) / z).epsilon(1e-6));
  CHECK(d[1] == Approx(0.5 * (std::exp(2.0) / z - 1.0)).epsilon(1e-6));
  CHECK(d[2] == Approx(0.5 * std::exp(3.0) / z).epsilon(1e-6));
  // Large logits do not overflow: the row maximum is subtracted first.
  const float big[2] = {1000.0f, 1000.0f};
  float db[2];
  CHECK(math::softmax_cross_entropy_row(big, 2, 0, 1.0f, db) == Approx(std::log(2.0)));
  CHECK(db[0] == Approx(-0.5f));
}

TEST_CASE("optimizer updates of one element", "[models][math][unit]") {
  float w = 1.0f;
  math::sgd_update(w, 0.5f, 0.1f, 0.2f);  // g' = 0.5 + 0.2·1
  CHECK(w == Approx(1.0f - 0.1f * 0.7f));

  float wm = 1.0f, u = 2.0f;
  math::momentum_update(wm, u, 0.5f, 0.1f, 0.9f, 0.0f, false);  // u = 0.9·2 + 0.5
  CHECK(u == Approx(2.3f));
  CHECK(wm == Approx(1.0f - 0.1f * 2.3f));
  float wn = 1.0f, un = 2.0f;
  math::momentum_update(wn, un, 0.5f, 0.1f, 0.9f, 0.0f, true);  // step g + m·u
  CHECK(wn == Approx(1.0f - 0.1f * (0.5f + 0.9f * 2.3f)));

  float wa = 1.0f, m = 0.0f, v = 0.0f;
  math::adam_update(wa, m, v, 0.5f, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f - 0.9f, 1.0f - 0.999f);
  CHECK(m == Approx(0.05f).epsilon(1e-5));
  CHECK(v == Approx(0.00025f).epsilon(1e-4));  // 1 − 0.999f is 0.0010000467
  CHECK(wa == Approx(1.0f - 0.01f));           // the first bias-corrected Adam step is lr·sign(g)
}

TEST_CASE("push-sum scaling and adding, and delayed compensation, of one element", "[models][math][unit]") {
  float x = 6.0f;
  math::push_sum_scale(x, 1.0f / 3.0f);
  CHECK(x == Approx(2.0f));
  math::push_sum_add(x, 1.5f);
  CHECK(x == 3.5f);
  math::delayed_compensation(x, 4.0f, 1.0f);  // x + (mixed − snapshot)
  CHECK(x == 6.5f);
}

TEST_CASE("GELU, tanh and sigmoid with their gradients", "[models][math][unit]") {
  // GELU(x) = x·Φ(x): Φ(1) = 0.8413447, φ(1) = 0.2419707.
  CHECK(math::gelu(1.0f) == Approx(0.8413447).epsilon(1e-6));
  CHECK(math::gelu(-1.0f) == Approx(-0.1586553).epsilon(1e-5));
  CHECK(math::gelu(0.0f) == 0.0f);
  CHECK(math::gelu_backward(1.0f, 2.0f) == Approx(2.0 * (0.8413447 + 0.2419707)).epsilon(1e-6));
  CHECK(math::tanh_forward(0.5f) == Approx(std::tanh(0.5)));
  CHECK(math::tanh_backward(0.5f, 2.0f) == Approx(2.0 * 0.75));
  CHECK(math::sigmoid(0.0f) == 0.5f);
  CHECK(math::sigmoid(2.0f) == Approx(1.0 / (1.0 + std::exp(-2.0))));
  // No overflow at either end.
  CHECK(math::sigmoid(-200.0f) == 0.0f);
  CHECK(math::sigmoid(200.0f) == 1.0f);
  CHECK(math::sigmoid_backward(0.25f, 2.0f) == Approx(2.0 * 0.25 * 0.75));
}

TEST_CASE("normalization of one element and its input gradient", "[models][math][unit]") {
  CHECK(math::inverse_std(3.0f, 1.0f) == Approx(0.5f));
  CHECK(math::normalize(5.0f, 1.0f, 0.5f, 3.0f, -1.0f) == Approx(3.0f * 2.0f - 1.0f));
  // inv_std·(g − mean_g − x̂·mean_g_xhat)
  CHECK(math::normalization_input_gradient(2.0f, 0.5f, 4.0f, 1.0f, 0.5f) == Approx(4.0f * (2.0f - 1.0f - 0.25f)));
  CHECK(math::running_update(1.0f, 3.0f, 0.25f) == Approx(1.5f));
}

TEST_CASE("dropout masks are a fixed function of key and index", "[models][math][unit]") {
  std::size_t kept = 0, differ = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const bool keep = math::dropout_keep(7, i, 0.25f);
    CHECK(keep == math::dropout_keep(7, i, 0.25f));
    kept += keep ? 1 : 0;
    differ += keep != math::dropout_keep(8, i, 0.25f) ? 1 : 0;
  }
  CHECK(kept == Approx(7500).margin(200));
  CHECK(differ == Approx(2 * 0.25 * 0.75 * 10000).margin(250));  // other keys, independent masks
  CHECK_FALSE(math::dropout_keep(7, 0, 1.0f));
  CHECK(math::dropout_keep(7, 0, 0.0f));
  CHECK(math::dropout(3.0f, true, 2.0f) == 6.0f);
  CHECK(math::dropout(3.0f, false, 2.0f) == 0.0f);
}

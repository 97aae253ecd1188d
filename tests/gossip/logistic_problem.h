// Test fixture: L2-regularised logistic regression on a synthetic linearly separable problem split
// over 8 sites (each holds 1/8 of the samples and computes full-batch gradients of its shard).
//
// Regularisation: λ/2·|w|² with λ = 0.01 (bias included). Without it the separable problem has no
// minimiser (the loss goes to 0 as |w| → ∞); with it the loss is 0.01-strongly convex, so the optimum
// is unique and single-site full-batch gradient descent (in double) finds it to machine precision.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace meridian::gossip::testing {

inline constexpr std::size_t kSites = 8, kPerSite = 32, kFeatures = 4, kDim = kFeatures + 1;  // + bias
inline constexpr double kLambda = 0.01;

struct Problem {
  std::vector<std::array<double, kFeatures>> x;
  std::vector<double> y;  // ±1
};

inline Problem make_problem() {
  std::mt19937 rng(2026);
  std::normal_distribution<double> normal;
  const std::array<double, kFeatures> truth = {1.5, -2.0, 0.5, 1.0};
  Problem p;
  while (p.x.size() < kSites * kPerSite) {
    std::array<double, kFeatures> v;
    for (auto& f : v) f = normal(rng);
    double margin = 0.3;
    for (std::size_t i = 0; i < kFeatures; ++i) margin += truth[i] * v[i];
    if (std::abs(margin) < 0.2) continue;  // a gap between the classes: separable
    p.x.push_back(v);
    p.y.push_back(margin > 0 ? 1.0 : -1.0);
  }
  return p;
}

// Mean loss and gradient over samples [begin, end) at w (double precision).
inline double loss_and_gradient(const Problem& p, std::size_t begin, std::size_t end, const std::vector<double>& w,
                                std::vector<double>* grad) {
  double loss = 0;
  if (grad) grad->assign(kDim, 0.0);
  for (std::size_t s = begin; s < end; ++s) {
    double z = w[kFeatures];
    for (std::size_t i = 0; i < kFeatures; ++i) z += w[i] * p.x[s][i];
    double margin = p.y[s] * z;
    loss += margin > 0 ? std::log1p(std::exp(-margin)) : -margin + std::log1p(std::exp(margin));
    if (grad) {
      double coef = -p.y[s] / (1.0 + std::exp(margin));
      for (std::size_t i = 0; i < kFeatures; ++i) (*grad)[i] += coef * p.x[s][i];
      (*grad)[kFeatures] += coef;
    }
  }
  const double count = static_cast<double>(end - begin);
  double reg = 0;
  for (std::size_t i = 0; i < kDim; ++i) {
    reg += w[i] * w[i];
    if (grad) (*grad)[i] = (*grad)[i] / count + kLambda * w[i];
  }
  return loss / count + 0.5 * kLambda * reg;
}

inline double global_loss(const Problem& p, const std::vector<float>& w) {
  return loss_and_gradient(p, 0, p.x.size(), std::vector<double>(w.begin(), w.end()), nullptr);
}

inline double optimal_loss(const Problem& p) {
  std::vector<double> w(kDim, 0.0), g;
  for (int it = 0; it < 20000; ++it) {
    loss_and_gradient(p, 0, p.x.size(), w, &g);
    for (std::size_t i = 0; i < kDim; ++i) w[i] -= 1.0 * g[i];
  }
  return loss_and_gradient(p, 0, p.x.size(), w, nullptr);
}

// The shard gradient of site r at the model `w` (float in, float out: what a trainer would compute).
inline void site_gradient(const Problem& p, std::size_t r, std::span<const float> w, std::vector<float>& out) {
  std::vector<double> g;
  loss_and_gradient(p, r * kPerSite, (r + 1) * kPerSite, std::vector<double>(w.begin(), w.end()), &g);
  out.assign(g.begin(), g.end());
}

// Decaying learning rate: decentralised methods (sgp, dsync) only reach the exact optimum when the
// step shrinks, since each site's own gradient does not vanish at the optimum.
inline double lr_at(std::uint64_t k) { return 0.5 / (1.0 + k / 300.0); }

// Fraction of all samples that `w` classifies correctly.
inline double accuracy(const Problem& p, const std::vector<float>& w) {
  std::size_t right = 0;
  for (std::size_t s = 0; s < p.x.size(); ++s) {
    double z = w[kFeatures];
    for (std::size_t i = 0; i < kFeatures; ++i) z += w[i] * p.x[s][i];
    right += (z > 0) == (p.y[s] > 0) ? 1 : 0;
  }
  return static_cast<double>(right) / static_cast<double>(p.x.size());
}

}  // namespace meridian::gossip::testing

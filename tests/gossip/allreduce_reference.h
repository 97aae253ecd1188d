// What allreduce with heavy-ball momentum reaches, in double precision: the reference the dts tests
// compare against when gradients do not depend on the weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace meridian::gossip::testing {

// Weights after `steps` steps of u ← m·u + mean_j g(k, j, i), w ← w − lr(k)·u, starting from w = 1, u = 0.
// `gradient(k, j, i)` is site j's gradient of coordinate i at step k; `lr(k)` the learning rate of step k.
template <typename LearningRate, typename Gradient>
std::vector<double> allreduce_momentum_reference(std::size_t sites, std::size_t dim, std::uint64_t steps,
                                                 double momentum, LearningRate lr, Gradient gradient) {
  std::vector<double> w(dim, 1.0), u(dim, 0.0);
  for (std::uint64_t k = 0; k < steps; ++k)
    for (std::size_t i = 0; i < dim; ++i) {
      double g = 0;
      for (std::size_t j = 0; j < sites; ++j) g += gradient(k, j, i);
      u[i] = momentum * u[i] + g / sites;
      w[i] -= lr(k) * u[i];
    }
  return w;
}

}  // namespace meridian::gossip::testing

// Sizes from files and flags are checked before they are multiplied or allocated
// (models/checked_size.h): the helpers themselves, and the layers, models and --widths that use them.
#include <catch2/catch.hpp>

#include <limits>
#include <memory>

#include "models/checked_size.h"
#include "models/conv2d.h"
#include "models/cpu_backend.h"
#include "models/initializer.h"
#include "models/linear.h"
#include "models/model_factory.h"
#include "models/model_file.h"

using namespace meridian::models;
using Catch::Matchers::Contains;

namespace {
constexpr std::size_t kHuge = std::size_t{1} << 61;
constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
}  // namespace

TEST_CASE("checked products and sums refuse what passes the bound or wraps", "[models][unit]") {
  CHECK(product_within({3, 4, 5}, 60) == 60u);
  CHECK_FALSE(product_within({3, 4, 5}, 59));
  CHECK_FALSE(product_within({kHuge, 8}, kMax));  // 2^64 wraps to 0
  CHECK(product_within({kHuge, 8, 0}, kMax) == std::nullopt);
  CHECK(product_within({0, kHuge}, 10) == 0u);
  CHECK(sum_within(kMax - 1, 1, kMax) == kMax);
  CHECK_FALSE(sum_within(kMax, 1, kMax));
  CHECK_THROWS_WITH(checked_product({kHuge, 8}, kMax, "layer x"),
                    Contains("layer x: 2305843009213693952 x 8 is more than"));
  CHECK_THROWS_AS(checked_sum(kMax, 1, kMax, "total"), meridian::error::UserError);
}

TEST_CASE("layers whose sizes pass the bounds are refused before anything is allocated", "[models][unit]") {
  CHECK_NOTHROW(Linear(784, 256, InitScheme::he));
  CHECK_THROWS_WITH(Linear(64, kHuge, InitScheme::he),
                    Contains("linear(64->2305843009213693952)") && Contains("268435456"));
  CHECK_THROWS_WITH(Linear(kMax, 2, InitScheme::he), Contains("input features"));
  CHECK_NOTHROW(Conv2d({3, 32, 32}, 16, 3, 1, 1, InitScheme::he));
  CHECK_THROWS_WITH(Conv2d({3, 32, 32}, 16, 3, 1, kHuge, InitScheme::he), Contains("padding"));
  CHECK_THROWS_WITH(Conv2d({3, 32, 32}, kHuge, 3, 1, 1, InitScheme::he), Contains("output"));
  CHECK_THROWS_WITH(Conv2d({kHuge, 4, 4}, 1, 3, 1, 1, InitScheme::he), Contains("patch"));
}

TEST_CASE("--widths and model files that declare huge layers are refused with the bound", "[models][unit]") {
  auto backend = std::make_shared<CpuBackend>(1);
  CHECK_THROWS_WITH(make_model("mlp", {1, 28, 28}, 10, {kHuge, 5 * kHuge}, backend, 1), Contains("268435456"));
  CHECK_THROWS_WITH(make_model("mlp", {1, 28, 28}, 10, {1u << 16, 1u << 16}, backend, 1),
                    Contains("linear(65536->65536)"));
  // Within each layer's bound but not in sum: the model's total is checked too.
  CHECK_THROWS_WITH(make_model("mlp", {1, 1, 16000}, 10, {16000, 16000}, backend, 1),
                    Contains("model mlp: parameters up to") && Contains("268435456"));
  CHECK_THROWS_WITH(
      parse_model_file("flatten\nlinear 9999999999999\nlinear classes\n", "m.model", {1, 8, 8}, 2, backend, 1),
      Contains("m.model:2:") && Contains("268435456"));
  // Activations: 4096 channels of 1000×1000 per sample is more than any model may produce.
  CHECK_THROWS_WITH(parse_model_file("conv2d 4096 kernel=1 padding=496\nglobal_avg_pool\nlinear classes\n", "a.model",
                                     {1, 8, 8}, 2, backend, 1),
                    Contains("a.model:1:") && Contains("67108864"));
  std::string nested;
  for (int i = 0; i < 40; ++i) nested += "residual\n";
  CHECK_THROWS_WITH(parse_model_file(nested, "n.model", {1, 8, 8}, 2, backend, 1),
                    Contains("n.model:33:") && Contains("nested more than 32 deep"));
}

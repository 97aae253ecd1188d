#include "models/model_factory.h"

#include <filesystem>
#include <stdexcept>

#include "error/error.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/dropout.h"
#include "models/flatten.h"
#include "models/global_average_pool.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/model_file.h"
#include "models/relu.h"
#include "models/residual_network.h"

namespace meridian::models {
namespace {

// Appends a layer whose input is the previous layer's output.
class LayerChain {
 public:
  explicit LayerChain(Shape input) : shape_(input) {}
  template <typename L, typename... Args>
  void add(Args&&... args) {
    add_layer(std::make_unique<L>(std::forward<Args>(args)...));
  }
  void add_layer(std::unique_ptr<Layer> layer) {
    layers_.push_back(std::move(layer));
    shape_ = layers_.back()->output_shape();
  }
  Shape shape() const { return shape_; }
  std::vector<std::unique_ptr<Layer>> take() { return std::move(layers_); }

 private:
  Shape shape_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace

std::unique_ptr<Model> make_logreg(Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                   std::uint64_t seed) {
  LayerChain chain(input);
  chain.add<Flatten>(chain.shape());
  chain.add<Linear>(input.size(), classes, InitScheme::xavier);
  return std::make_unique<Model>("logreg", chain.take(), classes, std::move(backend), seed);
}

std::unique_ptr<Model> make_mlp(Shape input, const std::vector<std::size_t>& hidden, std::size_t classes,
                                std::shared_ptr<Backend> backend, std::uint64_t seed) {
  LayerChain chain(input);
  chain.add<Flatten>(chain.shape());
  for (std::size_t width : hidden) {
    if (width == 0) throw error::UserError("mlp: hidden width 0");
    chain.add<Linear>(chain.shape().size(), width, InitScheme::he);
    chain.add<Relu>(chain.shape());
  }
  chain.add<Linear>(chain.shape().size(), classes, InitScheme::xavier);
  return std::make_unique<Model>("mlp", chain.take(), classes, std::move(backend), seed);
}

std::unique_ptr<Model> make_cnn(Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                std::uint64_t seed) {
  if (input.height < 12 || input.width < 12)
    throw error::UserError("cnn: input " + input.to_string() + " is too small (needs at least 12x12 images)");
  LayerChain chain(input);
  chain.add<Conv2d>(chain.shape(), 6, 5, 1, 2, InitScheme::he);
  chain.add<Relu>(chain.shape());
  chain.add<MaxPool2d>(chain.shape(), 2, 2);
  chain.add<Conv2d>(chain.shape(), 16, 5, 1, 0, InitScheme::he);
  chain.add<Relu>(chain.shape());
  chain.add<MaxPool2d>(chain.shape(), 2, 2);
  chain.add<Flatten>(chain.shape());
  chain.add<Linear>(chain.shape().size(), 120, InitScheme::he);
  chain.add<Relu>(chain.shape());
  chain.add<Linear>(120, 84, InitScheme::he);
  chain.add<Relu>(chain.shape());
  chain.add<Linear>(84, classes, InitScheme::xavier);
  return std::make_unique<Model>("cnn", chain.take(), classes, std::move(backend), seed);
}

std::unique_ptr<Model> make_mlp_bn(Shape input, const std::vector<std::size_t>& hidden, float dropout,
                                   std::size_t classes, std::shared_ptr<Backend> backend, std::uint64_t seed) {
  LayerChain chain(input);
  chain.add<Flatten>(chain.shape());
  for (std::size_t width : hidden) {
    if (width == 0) throw error::UserError("mlp-bn: hidden width 0");
    chain.add<Linear>(chain.shape().size(), width, InitScheme::he);
    chain.add<BatchNorm>(chain.shape());
    chain.add<Relu>(chain.shape());
    chain.add<Dropout>(chain.shape(), dropout);
  }
  chain.add<Linear>(chain.shape().size(), classes, InitScheme::xavier);
  return std::make_unique<Model>("mlp-bn", chain.take(), classes, std::move(backend), seed);
}

std::unique_ptr<Model> make_resnet(std::size_t blocks_per_stage, Shape input, std::size_t classes,
                                   std::shared_ptr<Backend> backend, std::uint64_t seed) {
  if (blocks_per_stage == 0) throw error::UserError("resnet: at least one block per stage");
  LayerChain chain(input);
  chain.add<Conv2d>(chain.shape(), 16, 3, 1, 1, InitScheme::he);
  chain.add<BatchNorm>(chain.shape());
  chain.add<Relu>(chain.shape());
  for (std::size_t channels : {16, 32, 64}) {
    for (std::size_t block = 0; block < blocks_per_stage; ++block) {
      const std::size_t stride = channels != 16 && block == 0 ? 2 : 1;
      chain.add_layer(make_basic_block(chain.shape(), channels, stride));
      chain.add<Relu>(chain.shape());
    }
  }
  chain.add<GlobalAveragePool>(chain.shape());
  chain.add<Linear>(chain.shape().size(), classes, InitScheme::xavier);
  return std::make_unique<Model>("resnet" + std::to_string(6 * blocks_per_stage + 2), chain.take(), classes,
                                 std::move(backend), seed);
}

const std::vector<std::string>& builtin_models() {
  static const std::vector<std::string> names{"logreg", "mlp", "mlp-bn", "cnn", "resnet8", "resnet20"};
  return names;
}

std::unique_ptr<Model> make_model(const std::string& kind, Shape input, std::size_t classes,
                                  const std::vector<std::size_t>& hidden, std::shared_ptr<Backend> backend,
                                  std::uint64_t seed) {
  const std::vector<std::size_t> widths = hidden.empty() ? std::vector<std::size_t>{256, 128} : hidden;
  if (kind == "logreg") return make_logreg(input, classes, std::move(backend), seed);
  if (kind == "mlp") return make_mlp(input, widths, classes, std::move(backend), seed);
  if (kind == "mlp-bn") return make_mlp_bn(input, widths, 0.2f, classes, std::move(backend), seed);
  if (kind == "cnn") return make_cnn(input, classes, std::move(backend), seed);
  if (kind == "resnet8") return make_resnet(1, input, classes, std::move(backend), seed);
  if (kind == "resnet20") return make_resnet(3, input, classes, std::move(backend), seed);
  std::error_code error;
  if (!std::filesystem::is_regular_file(kind, error)) {
    std::string names;
    for (const auto& name : builtin_models()) names += name + ", ";
    throw error::UserError("unknown model '" + kind + "' (expected " + names +
                           "or the path of a model file, see docs/models.md)");
  }
  return load_model_file(kind, input, classes, std::move(backend), seed);
}

}  // namespace meridian::models

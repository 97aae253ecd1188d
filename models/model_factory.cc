#include "models/model_factory.h"

#include <stdexcept>

#include "models/conv2d.h"
#include "models/flatten.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/relu.h"

namespace meridian::models {
namespace {

// Appends a layer whose input is the previous layer's output.
class LayerChain {
 public:
  explicit LayerChain(Shape input) : shape_(input) {}
  template <typename L, typename... Args>
  void add(Args&&... args) {
    layers_.push_back(std::make_unique<L>(std::forward<Args>(args)...));
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
    if (width == 0) throw std::invalid_argument("mlp: hidden width 0");
    chain.add<Linear>(chain.shape().size(), width, InitScheme::he);
    chain.add<Relu>(chain.shape());
  }
  chain.add<Linear>(chain.shape().size(), classes, InitScheme::xavier);
  return std::make_unique<Model>("mlp", chain.take(), classes, std::move(backend), seed);
}

std::unique_ptr<Model> make_cnn(Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                std::uint64_t seed) {
  if (input.height < 12 || input.width < 12)
    throw std::invalid_argument("cnn: input " + input.to_string() + " is too small (needs at least 12x12 images)");
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

std::unique_ptr<Model> make_model(const std::string& kind, Shape input, std::size_t classes,
                                  const std::vector<std::size_t>& hidden, std::shared_ptr<Backend> backend,
                                  std::uint64_t seed) {
  if (kind == "logreg") return make_logreg(input, classes, std::move(backend), seed);
  if (kind == "mlp")
    return make_mlp(input, hidden.empty() ? std::vector<std::size_t>{256, 128} : hidden, classes, std::move(backend),
                    seed);
  if (kind == "cnn") return make_cnn(input, classes, std::move(backend), seed);
  throw std::invalid_argument("unknown model '" + kind + "' (expected logreg, mlp or cnn)");
}

}  // namespace meridian::models

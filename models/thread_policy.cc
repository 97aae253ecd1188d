#include "models/thread_policy.h"

#include <stdexcept>
#include <string>

#include "models/conv2d.h"

namespace meridian::models {

void use_threads(Model& model, Backend& backend, std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("threads must be >= 1");
  if (!backend.host_addressable()) {
    model.set_threads(1);
    backend.set_threads(static_cast<int>(threads));
    return;
  }
  bool convolutional = false;
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    convolutional = convolutional || dynamic_cast<const Conv2d*>(&model.layer(i)) != nullptr;
  if (convolutional) {
    backend.set_threads(1);
    model.set_threads(threads);
  } else {
    model.set_threads(1);
    backend.set_threads(static_cast<int>(threads));
  }
}

}  // namespace meridian::models

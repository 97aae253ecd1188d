#include "models/thread_policy.h"

#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::models {

void use_threads(Model& model, Backend& backend, std::size_t threads) {
  if (threads == 0) throw error::UserError("threads must be >= 1");
  if (!backend.host_addressable()) {
    model.set_threads(1);
    backend.set_threads(static_cast<int>(threads));
    return;
  }
  // A convolution anywhere, also inside a residual block: the description names every nested layer.
  bool convolutional = false;
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    convolutional = convolutional || model.layer(i).describe().find("conv2d(") != std::string::npos;
  if (convolutional) {
    backend.set_threads(1);
    model.set_threads(threads);
  } else {
    model.set_threads(1);
    backend.set_threads(static_cast<int>(threads));
  }
}

}  // namespace meridian::models

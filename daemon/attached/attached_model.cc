#include "daemon/attached/attached_model.h"

#include <array>
#include <set>

#include "daemon/status/human_format.h"

namespace meridian::daemon {
namespace {

constexpr std::array<const char*, 4> kDtypes{"float32", "float16", "bfloat16", "float64"};

// Thousands separated, as people count (and as models::Model::summary() writes them): 235,146.
std::string group_thousands(std::size_t n) {
  const std::string digits = std::to_string(n);
  std::string text;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string text;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += 'x';
    text += std::to_string(shape[i]);
  }
  return text;
}

}  // namespace

std::string AttachedModel::fingerprint() const {
  std::string text = "attached";
  for (const auto& t : tensors) {
    text += '|';
    text += t.name;
    text += ':';
    text += shape_text(t.shape);
    text += ':';
    text += t.dtype;
  }
  text += "|params=";
  text += std::to_string(parameters);
  return text;
}

std::string AttachedModel::summary() const {
  return "attached model, " + format_count(tensors.size(), "tensor") + " (" + group_thousands(parameters) +
         " parameters)";
}

AttachedModel attached_model_of(std::vector<AttachedTensor> tensors) {
  if (tensors.empty()) throw AttachedModelError("the trainer declared no parameter tensors");
  AttachedModel model;
  std::set<std::string> names;
  for (auto& t : tensors) {
    const auto refuse = [&](const std::string& what) {
      return AttachedModelError("parameter '" + t.name + "': " + what);
    };
    if (t.name.empty()) throw AttachedModelError("a parameter tensor has no name");
    if (t.name.find_first_of("|:") != std::string::npos) throw refuse("names may not contain '|' or ':'");
    if (!names.insert(t.name).second) throw refuse("declared twice");
    bool known = false;
    for (const char* d : kDtypes) known = known || t.dtype == d;
    if (!known) throw refuse("dtype '" + t.dtype + "' is not float32, float16, bfloat16 or float64");
    std::size_t elements = 1;
    for (const auto dim : t.shape) {
      if (dim != 0 && elements > kMaxAttachedParameters / dim)
        throw refuse("shape " + shape_text(t.shape) + " is too large");
      elements *= static_cast<std::size_t>(dim);
    }
    t.elements = elements;
    if (model.parameters + elements > kMaxAttachedParameters)
      throw AttachedModelError("the model holds more than " + group_thousands(kMaxAttachedParameters) +
                               " parameters, more than an attached trainer may share");
    model.parameters += elements;
  }
  if (model.parameters == 0) throw AttachedModelError("the declared parameter tensors hold no elements");
  model.tensors = std::move(tensors);
  return model;
}

}  // namespace meridian::daemon

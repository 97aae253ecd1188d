// The model an attached trainer (daemon/attached/attached_trainer.h) declares when it attaches: its named
// parameter tensors in the order the trainer moves them, each with its shape and dtype. The daemon
// never sees the network itself; the declaration is what it checkpoints, what the federation agrees on
// at join (daemon/federation/federation_terms.h) and what sizes the shared segment.
//
// In the segment every tensor is float32 whatever its dtype (the trainer converts in its one copy), so
// mixing and checkpoints work on one contiguous span, as for a native model (models/model.h).
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "error/error.h"

namespace meridian::daemon {

// A declaration refused: its message names the tensor and what is wrong with it.
class AttachedModelError : public error::UserError {
 public:
  using error::UserError::UserError;
};

struct AttachedTensor {
  std::string name;                  // as the trainer names it (PyTorch: named_parameters())
  std::vector<std::uint64_t> shape;  // empty for a scalar
  std::string dtype;                 // "float32", "float16", "bfloat16" or "float64"
  std::size_t elements = 0;          // the product of shape
};

struct AttachedModel {
  std::vector<AttachedTensor> tensors;
  std::size_t parameters = 0;  // the sum of the tensors' elements

  // "attached|fc1.weight:256x784:float32|fc1.bias:256:float32|...|params=235146": compared at join and
  // against a checkpoint's model, so equal text means the same tensors in the same order.
  std::string fingerprint() const;
  // For people: "attached model, 6 tensors (235,146 parameters)".
  std::string summary() const;
};

// At most this many parameters (16 GiB of float32): a larger declaration is refused before anything
// is allocated for it.
inline constexpr std::size_t kMaxAttachedParameters = std::size_t{1} << 32;

// Checks `tensors` (names non-empty, unique and free of '|' and ':' which the fingerprint uses; known
// dtypes; at least one element in all; sizes multiplied with overflow checks and at most
// kMaxAttachedParameters) and fills in the element counts. Throws AttachedModelError naming the first
// tensor at fault.
AttachedModel attached_model_of(std::vector<AttachedTensor> tensors);

}  // namespace meridian::daemon

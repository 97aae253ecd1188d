#include "models/dropout.h"

#include <stdexcept>

#include "error/error.h"
#include "models/number_text.h"

namespace meridian::models {

Dropout::Dropout(Shape shape, float p) : shape_(shape), p_(p) {
  if (!(p >= 0.0f && p < 1.0f)) throw error::UserError("dropout: p " + number_text(p) + " is outside [0, 1)");
}

std::string Dropout::describe() const { return "dropout(" + number_text(p_) + ")"; }

std::unique_ptr<Layer> Dropout::clone() const {
  auto copy = std::make_unique<Dropout>(shape_, p_);
  copy->seed_ = seed_;
  copy->stream_ = stream_;
  return copy;
}

void Dropout::initialize(SplitMix64& random) {
  seed_ = random.next();
  draws_ = 0;
}

void Dropout::forward(Backend& backend, const float* in, float* out, std::size_t batch) {
  const std::size_t n = batch * shape_.size();
  if (!training_ || p_ == 0.0f) {
    backend.copy(out, in, n * sizeof(float));
    return;
  }
  // One SplitMix64 output per (seed, stream, draw): a hash of the three, so neighbouring draws and
  // streams give unrelated masks.
  SplitMix64 stream_hash(seed_ ^ SplitMix64(stream_).next());
  key_ = SplitMix64(stream_hash.next() + draws_++).next();
  backend.dropout_forward(n, p_, key_, in, out);
}

void Dropout::backward(Backend& backend, const float*, const float*, const float* dout, float* din, std::size_t batch) {
  if (din == nullptr) return;
  const std::size_t n = batch * shape_.size();
  if (!training_ || p_ == 0.0f) {
    backend.copy(din, dout, n * sizeof(float));
    return;
  }
  backend.dropout_backward(n, p_, key_, dout, din);
}

}  // namespace meridian::models

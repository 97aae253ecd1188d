// Error feedback for a stream of lossy-compressed contributions to a sum (Stich et al., "Sparsified
// SGD with memory"; Lin et al., "Deep Gradient Compression"): what compression cut from one message is
// added to the next one of the same stream, so that over time everything the site meant to send is
// sent. Invariant, exact in float: sent + residual_after == input + residual_before (the compressed
// value v = input + residual is split into what the codec keeps and the rest, and both parts of that
// split are exact: the top-k entries are copied, and x − half(x) is representable in float).
//
// Sound for contributions that are summed or averaged (dts' gradients and window displacements); not
// for values that are themselves the state (parameters), whose top-k would zero the rest.
//
// Thread-safety: one thread (the communication thread of the mixer that owns it).
#pragma once

#include <span>
#include <vector>

#include "gossip/tensor_codec.h"

namespace meridian::gossip {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(CompressionSpec spec) : codec_(spec) {}

  // Compresses input + residual into `packed` (for the wire), writes what the receivers decode into
  // `sent` (same size as input) and keeps the rest as the new residual. The residual starts at zero
  // and is resized (to zero) when the input length changes. Throws like TensorCodec::encode.
  void compress(std::span<const float> input, std::vector<float>& packed, std::span<float> sent);

  std::span<const float> residual() const { return residual_; }
  // Replaces the residual (to undo a compress whose message was never used: an abandoned round).
  void set_residual(std::span<const float> residual) { residual_.assign(residual.begin(), residual.end()); }
  const CompressionSpec& spec() const { return codec_.spec(); }

 private:
  TensorCodec codec_;
  std::vector<float> residual_;  // (n)
  std::vector<float> value_;     // (n) input + residual, scratch
};

}  // namespace meridian::gossip

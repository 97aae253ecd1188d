#include "gossip/error_feedback.h"

#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::gossip {

void ErrorFeedback::compress(std::span<const float> input, std::vector<float>& packed, std::span<float> sent) {
  const std::size_t n = input.size();
  if (sent.size() != n)
    throw error::InternalError("error feedback: sent has " + std::to_string(sent.size()) + " elements, input " +
                               std::to_string(n));
  if (residual_.size() != n) residual_.assign(n, 0.0f);
  value_.resize(n);
  for (std::size_t i = 0; i < n; ++i) value_[i] = input[i] + residual_[i];
  codec_.encode(value_, packed, sent);
  for (std::size_t i = 0; i < n; ++i) residual_[i] = value_[i] - sent[i];
}

}  // namespace meridian::gossip

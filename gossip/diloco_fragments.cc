#include "gossip/diloco_fragments.h"

#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::gossip {

DilocoFragments::DilocoFragments(std::size_t parameters, std::uint32_t inner_steps, std::uint32_t fragments)
    : parameters_(parameters), inner_steps_(inner_steps), fragments_(fragments) {
  if (inner_steps == 0) throw error::UserError("diloco: H (inner steps) must be at least 1");
  if (fragments == 0 || fragments > inner_steps)
    throw error::UserError("diloco: fragments F = " + std::to_string(fragments) + " must be in [1, H = " +
                           std::to_string(inner_steps) + "] (one fragment sync per step at most)");
  if (fragments > parameters)
    throw error::UserError("diloco: " + std::to_string(fragments) + " fragments of " + std::to_string(parameters) +
                           " parameters would leave one empty");
}

std::optional<std::uint32_t> DilocoFragments::synced_after(std::uint64_t k) const {
  const auto phase = static_cast<std::uint32_t>((k + 1) % inner_steps_);
  // o_f = ⌊f·H/F⌋ is increasing in f, so f is the one with o_f = phase if any: the smallest f with
  // f·H/F >= phase is ⌈phase·F/H⌉.
  const auto f = static_cast<std::uint32_t>((std::uint64_t{phase} * fragments_ + inner_steps_ - 1) / inner_steps_);
  if (f < fragments_ && offset(f) == phase) return f;
  return std::nullopt;
}

}  // namespace meridian::gossip

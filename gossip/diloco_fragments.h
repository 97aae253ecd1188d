// Streaming DiLoCo's schedule (Douillard et al., arXiv 2501.18512): the flat parameter buffer of n
// floats split into F contiguous fragments, fragment f holding elements [⌊n·f/F⌋, ⌊n·(f+1)/F⌋), each
// synced every H inner steps, fragment f at offset o_f = ⌊f·H/F⌋: after the inner steps k with
// (k + 1) mod H = o_f. With F = 1 that is plain DiLoCo, the whole buffer synced after steps H − 1,
// 2H − 1, ...; with F > 1 the syncs are staggered about H/F steps apart, so one exchange
// carries n/F floats and the link is busy more evenly. F <= H makes the offsets distinct, so at most
// one fragment syncs after any step and (step, kMix) names one exchange. Steps are absolute, so a site
// that starts or resumes mid-run agrees with the others on which fragment syncs when.
//
// Immutable after construction; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace meridian::gossip {

class DilocoFragments {
 public:
  // Throws error::UserError unless H >= 1, 1 <= F <= H and F <= n (no fragment is empty).
  DilocoFragments(std::size_t parameters, std::uint32_t inner_steps, std::uint32_t fragments);

  std::uint32_t count() const { return fragments_; }
  std::uint32_t inner_steps() const { return inner_steps_; }
  // The fragment synced after inner step k, if any.
  std::optional<std::uint32_t> synced_after(std::uint64_t k) const;
  // Fragment f's elements are [begin(f), end(f)); its sync offset o_f.
  std::size_t begin(std::uint32_t f) const { return parameters_ * f / fragments_; }
  std::size_t end(std::uint32_t f) const { return parameters_ * (f + 1) / fragments_; }
  std::uint32_t offset(std::uint32_t f) const {
    return static_cast<std::uint32_t>(std::uint64_t{inner_steps_} * f / fragments_);
  }

 private:
  std::size_t parameters_;
  std::uint32_t inner_steps_;
  std::uint32_t fragments_;
};

}  // namespace meridian::gossip

// Augmentation of image batches on the trainer's side: random crop with zero padding and random
// horizontal flip, applied while the batch is gathered from the dataset into the trainer's reused
// batch buffer, so a step does no extra pass over the batch and no allocation.
//
// Reproducible by construction: the transform of a row is a pure function of (seed, epoch, row), not
// of a generator's running state. A trainer resumed from a checkpoint (which stores the epoch of its
// BatchOrder) therefore sees exactly the batches it would have seen, and every build gives the same
// bits (the draws use integer arithmetic only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "models/data/dataset.h"

namespace meridian::models::data {

struct AugmentationSpec {
  // Random crop: the image is padded with `crop_padding` zero pixels on every side and a window of
  // the original size is cut at a uniform random offset, i.e. shifted by dx, dy in
  // [-crop_padding, crop_padding]. 0 disables it.
  std::size_t crop_padding = 0;
  // Mirror left-right with probability 1/2 (after the crop).
  bool horizontal_flip = false;

  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
  // "none", "crop:4", "flip" or "crop:4,flip": the form parse_augmentation_spec reads.
  std::string to_string() const;
  bool operator==(const AugmentationSpec&) const = default;
};

// Parses a comma-separated list of "crop:<padding>" (padding an integer 0..64) and "flip", or
// "none". Throws error::UserError naming the text and the accepted forms.
AugmentationSpec parse_augmentation_spec(std::string_view text);

// The transform of one row: shift (dx, dy) in [-padding, padding] and whether to mirror.
struct AugmentationDraw {
  int dx = 0, dy = 0;
  bool flip = false;
  bool operator==(const AugmentationDraw&) const = default;
};

// Gathers rows of one image dataset into a batch buffer, augmented. Holds a reference to the dataset,
// which must outlive it. Thread-safety: const methods may be called concurrently.
class ImageAugmentation {
 public:
  // Throws DataError when `spec` is enabled and the dataset has no image geometry (a table cannot be
  // cropped), or when crop_padding is not below the image's height and width.
  ImageAugmentation(const Dataset& data, AugmentationSpec spec, std::uint64_t seed);

  // The transform of `row` in `epoch`. Offsets are drawn by a 32-bit multiply-shift (bias below
  // 2^-24 for the paddings allowed), the flip from an independent bit.
  AugmentationDraw draw(std::uint64_t epoch, std::size_t row) const;

  // Writes the rows' features, transformed by draw(epoch, row), to `x` (rows.size(), dim) and their
  // labels to `labels` (rows.size()). Output pixel (c, y, x) is input (c, y + dy, x' + dx) where x' is
  // x, or width-1-x when flipped, and 0 where that falls outside the image. With a disabled spec it
  // is a plain copy. Rows must be < data.rows (not checked: BatchOrder hands out only such rows).
  void gather(std::span<const std::size_t> rows, std::uint64_t epoch, float* x, std::int32_t* labels) const;

  const AugmentationSpec& spec() const { return spec_; }

 private:
  const Dataset& data_;
  AugmentationSpec spec_;
  std::uint64_t seed_;
};

}  // namespace meridian::models::data

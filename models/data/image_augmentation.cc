#include "models/data/image_augmentation.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "error/error.h"
#include "models/data/seeded_random.h"

namespace meridian::models::data {

namespace {

constexpr std::size_t kMaxPadding = 64;

// A uniform integer in [0, n) from 32 random bits (Lemire's multiply-shift, without the rejection
// step: n is at most 129, so the bias is below n / 2^32).
std::uint32_t below(std::uint32_t bits, std::uint32_t n) {
  return static_cast<std::uint32_t>((std::uint64_t{bits} * n) >> 32);
}

// One output row of one channel: out[x] = in[x + dx] (or in[width-1-x + dx] mirrored), 0 outside.
void shifted_row(const float* in, float* out, std::ptrdiff_t width, std::ptrdiff_t dx, bool flip) {
  if (!flip) {
    const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, -dx), hi = std::min(width, width - dx);
    std::fill(out, out + lo, 0.0f);
    if (hi > lo) std::memcpy(out + lo, in + lo + dx, static_cast<std::size_t>(hi - lo) * sizeof(float));
    std::fill(out + std::max(lo, hi), out + width, 0.0f);
    return;
  }
  const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, dx), hi = std::min(width, width + dx);
  std::fill(out, out + lo, 0.0f);
  for (std::ptrdiff_t x = lo; x < hi; ++x) out[x] = in[width - 1 - x + dx];
  std::fill(out + std::max(lo, hi), out + width, 0.0f);
}

}  // namespace

std::string AugmentationSpec::to_string() const {
  std::string out;
  if (crop_padding > 0) out = "crop:" + std::to_string(crop_padding);
  if (horizontal_flip) out += out.empty() ? "flip" : ",flip";
  return out.empty() ? "none" : out;
}

AugmentationSpec parse_augmentation_spec(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return error::UserError("augmentation '" + std::string(text) + "': " + why +
                            " (expected none, or a comma-separated list of crop:<padding 0..64> and flip, "
                            "e.g. crop:4,flip)");
  };
  AugmentationSpec spec;
  if (text == "none") return spec;
  bool seen_crop = false;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    if (item == "flip") {
      if (spec.horizontal_flip) throw bad("flip given twice");
      spec.horizontal_flip = true;
    } else if (item.starts_with("crop:")) {
      if (seen_crop) throw bad("crop given twice");
      const std::string_view number = item.substr(5);
      std::size_t padding = 0;
      const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), padding);
      if (number.empty() || ec != std::errc() || ptr != number.data() + number.size() || padding > kMaxPadding) {
        throw bad("'" + std::string(number) + "' is not a padding in 0..64");
      }
      spec.crop_padding = padding;
      seen_crop = true;
    } else {
      throw bad("'" + std::string(item) + "' is not known");
    }
    start = end + 1;
  }
  return spec;
}

ImageAugmentation::ImageAugmentation(const Dataset& data, AugmentationSpec spec, std::uint64_t seed)
    : data_(data), spec_(spec), seed_(seed) {
  if (!spec_.enabled()) return;
  if (data_.channels == 0 || data_.height == 0 || data_.width == 0) {
    throw DataError("augmentation " + spec_.to_string() + " needs images, but the data is a table of " +
                    std::to_string(data_.dim) + " features per row");
  }
  if (spec_.crop_padding >= data_.height || spec_.crop_padding >= data_.width) {
    throw DataError("augmentation " + spec_.to_string() + ": the padding must be below the image size (" +
                    std::to_string(data_.height) + "x" + std::to_string(data_.width) + ")");
  }
}

AugmentationDraw ImageAugmentation::draw(std::uint64_t epoch, std::size_t row) const {
  const std::uint64_t h = SeededRandom::derive(SeededRandom::derive(seed_, epoch), row);
  AugmentationDraw d;
  if (spec_.crop_padding > 0) {
    const auto span = static_cast<std::uint32_t>(2 * spec_.crop_padding + 1);
    const auto pad = static_cast<int>(spec_.crop_padding);
    d.dx = static_cast<int>(below(static_cast<std::uint32_t>(h), span)) - pad;
    d.dy = static_cast<int>(below(static_cast<std::uint32_t>(h >> 32), span)) - pad;
  }
  // The flip bit comes from a further derivation, so it is independent of the offsets.
  if (spec_.horizontal_flip) d.flip = (SeededRandom::derive(h, 0) >> 63) != 0;
  return d;
}

void ImageAugmentation::gather(std::span<const std::size_t> rows, std::uint64_t epoch, float* x,
                               std::int32_t* labels) const {
  const std::size_t dim = data_.dim;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    labels[i] = data_.labels[rows[i]];
    const float* in = data_.row(rows[i]);
    float* out = x + i * dim;  // (channels, height, width)
    if (!spec_.enabled()) {
      std::memcpy(out, in, dim * sizeof(float));
      continue;
    }
    const AugmentationDraw d = draw(epoch, rows[i]);
    const auto height = static_cast<std::ptrdiff_t>(data_.height), width = static_cast<std::ptrdiff_t>(data_.width);
    for (std::size_t c = 0; c < data_.channels; ++c) {
      const float* plane_in = in + c * data_.height * data_.width;
      float* plane_out = out + c * data_.height * data_.width;
      for (std::ptrdiff_t y = 0; y < height; ++y) {
        float* row_out = plane_out + y * width;
        const std::ptrdiff_t sy = y + d.dy;
        if (sy < 0 || sy >= height) {
          std::fill(row_out, row_out + width, 0.0f);
          continue;
        }
        shifted_row(plane_in + sy * width, row_out, width, d.dx, d.flip);
      }
    }
  }
}

}  // namespace meridian::models::data

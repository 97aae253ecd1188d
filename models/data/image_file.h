// One PNG or JPEG file decoded to 8-bit pixels, through libpng (simplified API) and libjpeg-turbo.
// The format is told by the file's first bytes, not its name.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace meridian::models::data {

struct ImageInfo {
  std::size_t width = 0, height = 0;
  bool color = false;  // the file stores colour (RGB, palette, YCbCr); false for grayscale
};

// Reads the header of the image at `path`. Throws DataError "<path>: unreadable image: <reason>"
// for a missing file, a file that is neither PNG nor JPEG, and a damaged header; CMYK JPEGs are
// refused the same way.
ImageInfo probe_image(const std::string& path);

// Decodes the whole image at `path` into (height, width, channels) bytes, row-major, with
// channels 1 (colour converted to luma by the decoding library) or 3 (gray replicated into R, G and
// B). When `info` is given, it receives the file's header (size as stored, colour or not). A PNG's
// alpha channel is composited onto black; 16-bit PNG samples are reduced to 8 bits.
// Throws DataError "<path>: unreadable image: <reason>" for anything probe_image refuses and for
// truncated or corrupt pixel data (a libjpeg warning about corrupt data counts as an error).
std::vector<unsigned char> decode_image(const std::string& path, std::size_t channels, ImageInfo* info = nullptr);

}  // namespace meridian::models::data

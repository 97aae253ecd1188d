#include "models/data/idx_reader.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "error/error.h"
#include "models/checked_size.h"
#include "models/data/compressed_file.h"

namespace meridian::models::data {

namespace {

constexpr std::uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned byte, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned byte, 1 dimension

std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

std::string hex32(std::uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex;
  s.width(8);
  s.fill('0');
  s << v;
  return s.str();
}

// Reads the magic and the `dims` sizes that follow it; checks the magic.
std::vector<std::uint32_t> read_header(CompressedFile& file, std::uint32_t magic, std::size_t dims, const char* kind) {
  std::array<unsigned char, 16> buf{};
  // The magic first, on its own: a file of the other IDX kind may be shorter than this header.
  file.read_exact(buf.data(), 4, "the IDX magic number");
  const std::uint32_t got = big_endian_u32(buf.data());
  if (got != magic) {
    throw DataError(file.path() + ": wrong magic number " + std::to_string(got) + " (" + hex32(got) + "), expected " +
                    std::to_string(magic) + " (" + hex32(magic) + ") for IDX " + kind);
  }
  file.read_exact(buf.data() + 4, 4 * dims, "the IDX header");
  std::vector<std::uint32_t> sizes(dims);
  for (std::size_t i = 0; i < dims; ++i) sizes[i] = big_endian_u32(buf.data() + 4 * (i + 1));
  return sizes;
}

// A payload the file cannot possibly hold is reported as truncation before anything is allocated,
// so a corrupt header cannot make the reader ask for terabytes.
void check_payload_fits(const CompressedFile& file, std::uintmax_t payload, std::size_t header_bytes,
                        const std::string& what) {
  const std::uintmax_t room = file.max_content_bytes();
  if (payload > room || (!file.compressed() && payload > room - header_bytes)) {
    throw DataError(file.path() + ": truncated: header announces " + what + " (" + std::to_string(payload) +
                    " bytes) but the file is only " + std::to_string(file.size_on_disk()) + " bytes");
  }
}

void check_no_trailing_bytes(CompressedFile& file) {
  unsigned char extra = 0;
  if (file.read(&extra, 1) != 0) {
    throw DataError(file.path() + ": unexpected data after the last item announced by the IDX header");
  }
}

// The labels of a labels file, each checked against `classes`.
std::vector<std::int32_t> read_labels(const std::string& labels_path, std::size_t classes) {
  CompressedFile file(labels_path);
  const auto sizes = read_header(file, kLabelsMagic, 1, "labels (unsigned bytes, 1 dimension)");
  const std::size_t count = sizes[0];
  check_payload_fits(file, count, 8, std::to_string(count) + " labels");
  std::vector<unsigned char> bytes(count);
  file.read_exact(bytes.data(), count, std::to_string(count) + " labels");
  check_no_trailing_bytes(file);
  std::vector<std::int32_t> labels(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (bytes[i] >= classes) {
      throw DataError(labels_path + ": label " + std::to_string(bytes[i]) + " of item " + std::to_string(i) +
                      " is out of range (expected 0.." + std::to_string(classes - 1) + ")");
    }
    labels[i] = bytes[i];
  }
  return labels;
}

void check_selection(std::span<const std::size_t> rows, std::size_t count) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= count || (i > 0 && rows[i] <= rows[i - 1])) {
      throw error::InternalError("read_idx: the row selection must be ascending indices below " +
                                 std::to_string(count) + "; entry " + std::to_string(i) + " is " +
                                 std::to_string(rows[i]));
    }
  }
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path, std::size_t classes,
                 const RowSelection& select) {
  if (classes == 0 || classes > 256) {
    throw DataError(labels_path + ": cannot check labels against " + std::to_string(classes) +
                    " classes (IDX byte labels allow 1..256)");
  }
  // The labels first: they are small, and they decide which rows `select` keeps before any image is
  // converted.
  std::vector<std::int32_t> all_labels = read_labels(labels_path, classes);
  std::vector<std::size_t> kept;
  if (select) {
    kept = select(all_labels);
    check_selection(kept, all_labels.size());
  }
  Dataset d;
  d.classes = classes;
  CompressedFile file(images_path);
  const auto sizes = read_header(file, kImagesMagic, 3, "images (unsigned bytes, 3 dimensions)");
  const std::size_t count = sizes[0], height = sizes[1], width = sizes[2];
  if (height == 0 || width == 0) {
    throw DataError(images_path + ": image size " + std::to_string(height) + "x" + std::to_string(width) + " is empty");
  }
  if (count == 0) throw DataError(images_path + ": the IDX header announces no images");
  // height * width fits in 64 bits (both < 2^32); the product with count may not.
  const std::uintmax_t pixels = std::uintmax_t{height} * width;
  const std::uintmax_t payload = count != 0 && pixels > std::numeric_limits<std::uintmax_t>::max() / count
                                     ? std::numeric_limits<std::uintmax_t>::max()
                                     : pixels * count;
  check_payload_fits(file, payload, 16,
                     std::to_string(count) + " images of " + std::to_string(height) + "x" + std::to_string(width));
  // One image is one sample of a model: its pixels are bounded as a model's input is (a file that
  // cannot even hold what it announces is reported as truncated, above).
  checked_product<DataError>({height, width}, kMaxSampleValues, images_path + ": pixels per image");
  if (count != all_labels.size()) {
    throw DataError(labels_path + ": holds " + std::to_string(all_labels.size()) + " labels but " + images_path +
                    " holds " + std::to_string(count) + " images");
  }
  d.rows = select ? kept.size() : count;
  d.channels = 1;
  d.height = height;
  d.width = width;
  d.dim = height * width;
  d.features.resize(d.rows * d.dim);
  // Decode in blocks of images through one small byte buffer: the float array of the kept rows is the
  // only large allocation. Every byte is still read, so a truncated or corrupt file fails whatever is
  // kept.
  constexpr std::size_t kBlockBytes = std::size_t{1} << 20;
  const std::size_t images_per_block = std::max<std::size_t>(1, kBlockBytes / d.dim);
  std::vector<unsigned char> bytes(images_per_block * d.dim);
  std::size_t next_kept = 0;  // with a selection: the first entry of `kept` not yet converted
  for (std::size_t first = 0; first < count; first += images_per_block) {
    const std::size_t n = std::min(images_per_block, count - first);
    file.read_exact(
        bytes.data(), n * d.dim,
        "images " + std::to_string(first) + ".." + std::to_string(first + n - 1) + " of " + std::to_string(count));
    auto convert = [&](std::size_t image, std::size_t row) {
      const unsigned char* in = bytes.data() + (image - first) * d.dim;
      float* out = d.features.data() + row * d.dim;
      for (std::size_t i = 0; i < d.dim; ++i) out[i] = static_cast<float>(in[i]) * (1.0f / 255.0f);
    };
    if (!select) {
      for (std::size_t image = first; image < first + n; ++image) convert(image, image);
      continue;
    }
    for (; next_kept < kept.size() && kept[next_kept] < first + n; ++next_kept) convert(kept[next_kept], next_kept);
  }
  check_no_trailing_bytes(file);
  if (select) {
    d.labels.resize(kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) d.labels[i] = all_labels[kept[i]];
  } else {
    d.labels = std::move(all_labels);
  }
  return d;
}

Dataset load_fashion_mnist(const std::string& dir, bool train, const RowSelection& select) {
  const std::string prefix = train ? "train" : "t10k";
  // Debian ships the gzip files exactly as the Zalando release names them; a user who unpacked them
  // has the same names without .gz.
  auto find = [&](const std::string& stem) {
    const std::filesystem::path base = std::filesystem::path(dir) / (prefix + stem);
    for (const std::string suffix : {".gz", ""}) {
      std::filesystem::path p = base;
      p += suffix;
      std::error_code ec;
      if (std::filesystem::is_regular_file(p, ec)) return p.string();
    }
    throw DataError(dir + ": no Fashion-MNIST " + (train ? "training" : "test") + " file " + prefix + stem +
                    ".gz (or unpacked " + prefix + stem +
                    "); install Debian's dataset-fashion-mnist or pass the directory that holds it");
  };
  const std::string images = find("-images-idx3-ubyte");
  const std::string labels = find("-labels-idx1-ubyte");
  Dataset d = read_idx(images, labels, kFashionMnistClasses, select);
  d.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return d;
}

}  // namespace meridian::models::data

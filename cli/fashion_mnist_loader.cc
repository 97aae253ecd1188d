#include "cli/fashion_mnist_loader.h"

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace meridian::cli {
namespace {

using models::data::DataError;

// gzread reads gzip and, transparently, raw files, so one path serves both.
std::vector<std::uint8_t> read_all(const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError(path + ": no such file");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw DataError(path + ": cannot open");
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  int n;
  while ((n = gzread(file.get(), chunk, sizeof chunk)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  if (n < 0) throw DataError(path + ": corrupt gzip stream");
  return bytes;
}

std::uint32_t big_endian(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

}  // namespace

models::data::Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  std::string images_path = prefix + "-images-idx3-ubyte.gz", labels_path = prefix + "-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(images_path)) images_path = prefix + "-images-idx3-ubyte";
  if (!std::filesystem::exists(labels_path)) labels_path = prefix + "-labels-idx1-ubyte";
  const auto images = read_all(images_path);
  const auto labels = read_all(labels_path);
  if (images.size() < 16 || big_endian(images, 0) != 0x803)
    throw DataError(images_path + ": not an IDX image file (wrong magic number)");
  if (labels.size() < 8 || big_endian(labels, 0) != 0x801)
    throw DataError(labels_path + ": not an IDX label file (wrong magic number)");
  const std::size_t rows = big_endian(images, 4), height = big_endian(images, 8), width = big_endian(images, 12);
  if (images.size() != 16 + rows * height * width) throw DataError(images_path + ": truncated file");
  if (big_endian(labels, 4) != rows || labels.size() != 8 + rows)
    throw DataError(labels_path + ": label count does not match " + images_path);
  models::data::Dataset d;
  d.rows = rows;
  d.dim = height * width;
  d.classes = 10;
  d.channels = 1;
  d.height = height;
  d.width = width;
  d.features.resize(rows * d.dim);
  for (std::size_t i = 0; i < d.features.size(); ++i) d.features[i] = static_cast<float>(images[16 + i]) / 255.0f;
  d.labels.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    if (labels[8 + i] >= 10) throw DataError(labels_path + ": label " + std::to_string(labels[8 + i]) + " out of range");
    d.labels[i] = labels[8 + i];
  }
  return d;
}

}  // namespace meridian::cli

// Reader for the IDX format of MNIST and Fashion-MNIST: an images file (magic 2051: unsigned bytes,
// 3 dimensions count x height x width) and a labels file (magic 2049: unsigned bytes, 1 dimension),
// big-endian sizes, each file raw or gzip-compressed (told apart by the gzip magic, not the name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/data/dataset.h"

namespace meridian::models::data {

// Chooses the rows to keep from the labels of all rows in the file: strictly ascending indices below
// labels.size() (a site's part of a partition, say). An empty function keeps every row.
using RowSelection = std::function<std::vector<std::size_t>(std::span<const std::int32_t> labels)>;

// Reads an images/labels pair. Pixels are scaled from 0..255 to [0, 1]; the geometry is set to
// (1, height, width) and dim = height * width; classes = `classes`.
// With `select`, the labels are read first and only the rows it returns are converted and kept, in
// file order: the result equals reading every row and taking Dataset::subset() of them, without
// holding the other rows' floats (a quarter of the memory and conversions for one of 4 sites). The
// whole file is still read and checked.
// Throws DataError naming the file and the problem: missing file, wrong magic number, truncated file
// (or a corrupt gzip stream), extra bytes after the data, a label >= classes, and image and label
// counts that differ; error::InternalError when the selection is not strictly ascending or names a
// row past the end.
Dataset read_idx(const std::string& images_path, const std::string& labels_path, std::size_t classes = 10,
                 const RowSelection& select = {});

// Loads Fashion-MNIST as Debian's dataset-fashion-mnist installs it (dir = /usr/share/datasets/
// fashion-mnist): train-{images-idx3,labels-idx1}-ubyte.gz for train = true, t10k-... for the test set;
// the same names without .gz are accepted too. Sets class_names ("T-shirt/top", ..., "Ankle boot").
// `select` as for read_idx. Throws DataError naming the directory and the file names it looked for when
// they are absent, and whatever read_idx throws.
Dataset load_fashion_mnist(const std::string& dir, bool train, const RowSelection& select = {});

// The classes of Fashion-MNIST (and MNIST), labels 0..9.
inline constexpr std::size_t kFashionMnistClasses = 10;

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace meridian::models::data

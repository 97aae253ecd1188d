// Reader for NumPy arrays: a features .npy with a labels .npy, or an .npz archive holding both (as
// np.savez and np.savez_compressed write it). The layout of image arrays is stated by the caller,
// never guessed from the sizes.
//
// Features: float32, float64 or uint8, shaped
//   (N, F)        a table: dim = F, no image geometry;
//   (N, H, W)     grayscale images: geometry (1, H, W);
//   (N, C, H, W)  images, only with layout kNchw;
//   (N, H, W, C)  images, only with layout kNhwc (converted to the Dataset's channel-major rows).
// uint8 values are pixels and are scaled from 0..255 to [0, 1]; float values are kept as stored (they
// must be finite). The reader does not standardize (Dataset::standardization stays empty).
// Labels: shape (N,) or (N, 1), integers of any width (label = the integer) or text ('<U', '|S';
// mapped through the class list).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/npy_array.h"

namespace meridian::models::data {

// How a 4-D features array orders its axes.
enum class ArrayLayout { kUnstated, kNchw, kNhwc };

// Parses "nchw" or "nhwc" (any case). Throws error::UserError naming the text and both forms.
ArrayLayout parse_array_layout(std::string_view text);
const char* to_string(ArrayLayout layout);

struct NpyOptions {
  // Required for 4-D features; must be left unstated for 2-D features (a stated image layout on a
  // table is a mistake worth hearing about). 3-D features are N×H×W whatever is stated.
  ArrayLayout layout = ArrayLayout::kUnstated;
  // The class list. When set, an integer label must be below its size and a text label must be one
  // of its names (label = position). When empty: integer labels give classes 0..max (named "0", "1",
  // ...), text labels give their distinct values in text order.
  std::vector<std::string> class_names;
  // The .npz arrays holding features and labels (an entry "x.npy" is the array "x").
  std::string features_key = "x";
  std::string labels_key = "y";
};

// Reads a features .npy and a labels .npy (each raw or gzip-compressed).
// Throws DataError naming the file, and the row where it applies: missing file, anything
// parse_npy() refuses, an unsupported dtype, a shape that is not one of the above or does not match
// the layout, a 4-D array without a stated layout, no rows or no features, a NaN or infinite
// feature, labels of another shape or count than the features' rows, a negative or out-of-range
// integer label, and a text label not in the class list.
Dataset read_npy(const std::string& features_path, const std::string& labels_path, const NpyOptions& options = {});

// Reads the arrays options.features_key and options.labels_key of an .npz. Throws DataError like
// read_npy, naming the archive and the array, plus: not a zip archive, a damaged entry, and a missing
// array (the message lists the arrays the archive holds).
Dataset read_npz(const std::string& path, const NpyOptions& options = {});

// The Dataset of a parsed features array and labels array; `features_where` and `labels_where` name
// them in messages. Throws as read_npy.
Dataset dataset_from_arrays(const NpyArray& features, const std::string& features_where, const NpyArray& labels,
                            const std::string& labels_where, const NpyOptions& options = {});

}  // namespace meridian::models::data

// One way to name data: a path, with the format taken from the path itself. This is what
// `--train PATH` and `--test PATH` hand over.
//
//   a folder               image folder, one subfolder per class (image_folder_reader.h)
//   *.npz                  NumPy archive with a features and a labels array (npy_reader.h)
//   FEATURES.npy,LABELS.npy  two NumPy arrays, named as a pair with a comma
//   *.csv, *.csv.gz        CSV table (csv_reader.h)
//   IMAGES[,LABELS]        IDX pair (idx_reader.h): a file whose first bytes are the IDX images magic
//                          (raw or gzip). Without ",LABELS" the labels file is found by the MNIST naming:
//                          "images-idx3" (or "images.idx3") in the file name becomes "labels-idx1".
//
// A path that exists as written is never split at a comma; otherwise "A,B" names a pair, where only
// .npy features and IDX images take one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/idx_reader.h"
#include "models/data/npy_reader.h"
#include "models/data/standardization.h"
#include "models/data/tabular_schema.h"

namespace meridian::models::data {

enum class DataFormat { kImageFolder, kNpz, kNpy, kCsv, kIdx };
const char* to_string(DataFormat format);

struct DataPath {
  DataFormat format = DataFormat::kCsv;
  std::string path;         // the folder, the file, or the features / images file of a pair
  std::string labels_path;  // the labels file of an .npy or IDX pair; empty otherwise
};

// Tells the format from `text` as above. Looks at the file system (is it a folder, does the file
// exist, the IDX magic) but reads no data. Throws DataError naming the path: missing file or folder,
// an .npy without its labels file, a pair whose first file is not .npy or IDX, an IDX images file
// whose labels file cannot be found by name, and a file of no known format (the message lists them).
DataPath resolve_data_path(const std::string& text);

// Parses a class list as `--classes` takes it: names separated by commas, surrounding spaces dropped
// ("benign, malignant"). Throws error::UserError naming the text for an empty list, an empty
// name or a name given twice.
std::vector<std::string> parse_class_list(std::string_view text);

// The deprecated way to name CSV data (--dataset csv --train-csv F --test-csv G) read as the documented
// one (--train F --test G): each old path given is copied into `train` or `test`. An old and a new
// option that name different files for the same role are a problem ("--train-csv: ..."), listed in
// `problems`; `warning` is the deprecation line to print, naming the options to use, empty when no
// old option is given. `--dataset csv` itself stays valid next to --train: it only says the data is a
// table.
struct LegacyCsvFold {
  std::string warning;
  std::vector<std::string> problems;
};
LegacyCsvFold fold_legacy_csv_names(std::string& train, std::string& test, const std::string& train_csv,
                                    const std::string& test_csv);

// Everything a caller may state about the data; each reader uses its part.
struct DataOptions {
  // The class list (--classes a,b,c). Empty: each reader derives it from the data (see its header).
  // For the test set, load_train_and_test passes the training set's list.
  std::vector<std::string> class_names;
  // Image layout of 4-D NumPy features (--layout nchw|nhwc).
  ArrayLayout layout = ArrayLayout::kUnstated;
  // The arrays of an .npz.
  std::string features_key = "x";
  std::string labels_key = "y";
  // CSV: the label column, by header name or, when all digits, by 0-based index; empty: the last.
  std::string label_column;
  // CSV: statistics to scale with (the training file's); empty: fitted on the file.
  Standardization standardization;
  // CSV: false keeps the features as read (CsvOptions::standardize), for the test set too.
  bool standardize = true;
  // CSV: ignored and category columns, missing indicators (--ignore-columns, --categorical,
  // --missing-indicators; tabular_schema.h).
  TabularSpec tabular;
  // CSV: the training file's schema to match the columns to by name, and that file's name (set by
  // load_train_and_test for the test set; csv_reader.h).
  std::optional<TableSchema> schema;
  std::string schema_from;
  // Where class_names came from, for the message about a label outside them; empty with a class list
  // means --classes.
  std::string classes_from;
  // Image folders: 1 or 3 channels, 0 to follow the images.
  std::size_t channels = 0;
  // Keeps only these rows (a site's part); empty keeps all. IDX files convert only the kept rows;
  // other formats read everything and keep the subset.
  RowSelection select;
};

// Reads the data `path` names (resolve_data_path) with `options`. Every format yields a Dataset with
// labels in [0, classes) and Dataset::class_names set; IDX without a class list has classes 0..max
// named "0", "1", .... Throws DataError from resolve_data_path and from the format's reader.
Dataset load_dataset(const std::string& path, const DataOptions& options = {});

struct TrainAndTest {
  Dataset train;
  Dataset test;  // rows == 0 when no test path was given
};

// Reads the training data, then the test data (when `test_path` is not empty) with the training
// set's class list, standardization, table schema (columns matched by name) and, for image folders,
// channel count, so that labels, inputs and scaling mean the same in both. options.select applies to the training set only. Throws DataError from
// load_dataset, and when the test set's shape differs from the training set's, naming both paths and
// both shapes (features per row, and image geometry when either has one).
TrainAndTest load_train_and_test(const std::string& train_path, const std::string& test_path,
                                 const DataOptions& options = {});

// Throws DataError when `b` cannot be evaluated by a model trained on `a`: different features per row
// or image geometry. The message names `a_name` and `b_name` with their shapes.
void check_same_shape(const Dataset& a, const std::string& a_name, const Dataset& b, const std::string& b_name);

}  // namespace meridian::models::data

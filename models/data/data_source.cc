#include "models/data/data_source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>
#include <tuple>

#include "error/error.h"
#include "models/data/compressed_file.h"
#include "models/data/csv_reader.h"
#include "models/data/image_folder_reader.h"

namespace meridian::models::data {

namespace {

namespace fs = std::filesystem;

constexpr const char* kKnownFormats =
    "a folder of class subfolders, .npz, FEATURES.npy,LABELS.npy, .csv or .csv.gz, or an IDX images file";

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                    [](char lower, char c) { return std::tolower(static_cast<unsigned char>(c)) == lower; });
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// Whether the file starts with the IDX images magic 0x00000803 (after inflating a gzip file).
bool has_idx_images_magic(const std::string& path) {
  try {
    CompressedFile file(path);
    unsigned char magic[4] = {};
    return file.read(magic, 4) == 4 && magic[0] == 0 && magic[1] == 0 && magic[2] == 8 && magic[3] == 3;
  } catch (const DataError&) {
    return false;  // unreadable or a broken gzip: not recognizably IDX, reported as an unknown format
  }
}

// The MNIST naming: train-images-idx3-ubyte(.gz) goes with train-labels-idx1-ubyte(.gz).
std::string idx_labels_by_name(const std::string& images) {
  const fs::path p(images);
  std::string name = p.filename().string();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"images-idx3", "labels-idx1"}, {"images.idx3", "labels.idx1"}}) {
    const auto at = name.find(from);
    if (at == std::string::npos) continue;
    name.replace(at, from.size(), to);
    const std::string labels = (p.parent_path() / name).string();
    if (!exists(labels)) {
      throw DataError(images + ": IDX images without their labels: " + labels +
                      " does not exist; name both as IMAGES,LABELS");
    }
    return labels;
  }
  throw DataError(images +
                  ": IDX images without labels: the name holds no 'images-idx3' to find the labels file "
                  "by; name both as IMAGES,LABELS");
}

CsvOptions csv_options(const DataOptions& options) {
  CsvOptions csv;
  const std::string& column = options.label_column;
  if (!column.empty() &&
      std::all_of(column.begin(), column.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    csv.label_index = std::stoul(column);
  } else {
    csv.label_column = column;
  }
  csv.standardization = options.standardization;
  csv.standardize = options.standardize;
  csv.class_names = options.class_names;
  csv.classes_from = options.classes_from.empty() && !options.class_names.empty() ? "--classes" : options.classes_from;
  csv.tabular = options.tabular;
  csv.schema = options.schema;
  csv.schema_from = options.schema_from;
  return csv;
}

NpyOptions npy_options(const DataOptions& options) {
  NpyOptions npy;
  npy.layout = options.layout;
  npy.class_names = options.class_names;
  npy.features_key = options.features_key;
  npy.labels_key = options.labels_key;
  return npy;
}

Dataset read_idx_pair(const DataPath& where, const DataOptions& options) {
  // IDX labels are bytes: read against the full byte range, then the classes are the class list or
  // 0..max of the labels in the file (all rows, not only the kept ones, so every site of a split
  // agrees).
  const std::size_t known = options.class_names.size();
  std::int32_t max_label = -1;
  RowSelection select = [&](std::span<const std::int32_t> labels) {
    for (const std::int32_t l : labels) max_label = std::max(max_label, l);
    if (options.select) return options.select(labels);
    std::vector<std::size_t> all(labels.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  };
  Dataset d = read_idx(where.path, where.labels_path, known > 0 ? known : 256, select);
  d.class_names = options.class_names;
  for (auto c = static_cast<std::int32_t>(known); c <= max_label; ++c) d.class_names.push_back(std::to_string(c));
  d.classes = d.class_names.size();
  return d;
}

std::string shape_text(const Dataset& d) {
  std::string s = std::to_string(d.dim) + " features per row";
  if (d.channels > 0) {
    s += " (images " + std::to_string(d.channels) + "x" + std::to_string(d.height) + "x" + std::to_string(d.width) +
         ", channels x height x width)";
  }
  return s;
}

}  // namespace

const char* to_string(DataFormat format) {
  switch (format) {
    case DataFormat::kImageFolder: return "image folder";
    case DataFormat::kNpz: return "npz";
    case DataFormat::kNpy: return "npy";
    case DataFormat::kCsv: return "csv";
    case DataFormat::kIdx: return "idx";
  }
  return "unknown";
}

std::vector<std::string> parse_class_list(std::string_view text) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string_view name = text.substr(start, end - start);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front())) != 0) name.remove_prefix(1);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())) != 0) name.remove_suffix(1);
    if (name.empty()) {
      throw error::UserError("class list '" + std::string(text) + "': class " + std::to_string(names.size() + 1) +
                             " has no name (expected names separated by commas, e.g. benign,malignant)");
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      throw error::UserError("class list '" + std::string(text) + "': '" + std::string(name) + "' is given twice");
    }
    names.emplace_back(name);
    start = end + 1;
  }
  return names;
}

LegacyCsvFold fold_legacy_csv_names(std::string& train, std::string& test, const std::string& train_csv,
                                    const std::string& test_csv) {
  LegacyCsvFold out;
  std::string old_form, new_form;
  for (const auto& [old_option, old_path, new_option, new_path] :
       {std::tuple{"--train-csv", &train_csv, "--train", &train}, std::tuple{"--test-csv", &test_csv, "--test", &test}}) {
    if (old_path->empty()) continue;
    old_form += std::string(old_form.empty() ? "" : " ") + old_option + " " + *old_path;
    new_form += std::string(new_form.empty() ? "" : " ") + new_option + " " + *old_path;
    if (!new_path->empty() && *new_path != *old_path) {
      out.problems.push_back(std::string(old_option) + ": names " + *old_path + " but " + new_option + " names " +
                             *new_path + ": give only " + new_option + " (" + old_option + " is its old name)");
      continue;
    }
    *new_path = *old_path;
  }
  if (!old_form.empty()) {
    out.warning = old_form + " is deprecated: name the data as " + new_form +
                  " (the same options for every format, docs/datasets.md; --dataset csv is then not needed)";
  }
  return out;
}

DataPath resolve_data_path(const std::string& text) {
  if (text.empty()) throw DataError("no data path given (expected " + std::string(kKnownFormats) + ")");
  DataPath out;
  out.path = text;
  const auto comma = text.find(',');
  if (!exists(text) && comma != std::string::npos) {
    out.path = text.substr(0, comma);
    out.labels_path = text.substr(comma + 1);
    if (out.labels_path.find(',') != std::string::npos || out.path.empty() || out.labels_path.empty()) {
      throw DataError(text + ": a pair is written FEATURES,LABELS (two paths, one comma)");
    }
    if (!exists(out.labels_path))
      throw DataError(out.labels_path + ": no such file (the labels of the pair " + text + ")");
  }
  std::error_code ec;
  if (!exists(out.path)) throw DataError(out.path + ": no such file or folder");
  const bool pair = !out.labels_path.empty();
  if (fs::is_directory(out.path, ec)) {
    if (pair) throw DataError(text + ": a folder cannot take a labels file; its subfolders name the classes");
    out.format = DataFormat::kImageFolder;
    return out;
  }
  if (ends_with_ci(out.path, ".npy")) {
    if (!pair) {
      throw DataError(out.path + ": an .npy holds one array; name the labels too, as FEATURES.npy,LABELS.npy");
    }
    out.format = DataFormat::kNpy;
    return out;
  }
  if (has_idx_images_magic(out.path)) {
    out.format = DataFormat::kIdx;
    if (!pair) out.labels_path = idx_labels_by_name(out.path);
    return out;
  }
  if (pair) {
    throw DataError(text + ": only .npy features and IDX images take a labels file after a comma; " + out.path +
                    " is neither");
  }
  if (ends_with_ci(out.path, ".npz")) {
    out.format = DataFormat::kNpz;
    return out;
  }
  if (ends_with_ci(out.path, ".csv") || ends_with_ci(out.path, ".csv.gz")) {
    out.format = DataFormat::kCsv;
    return out;
  }
  throw DataError(out.path + ": cannot tell the data format from the path (expected " + std::string(kKnownFormats) +
                  ")");
}

Dataset load_dataset(const std::string& path, const DataOptions& options) {
  const DataPath where = resolve_data_path(path);
  if (where.format == DataFormat::kIdx) return read_idx_pair(where, options);
  Dataset d;
  switch (where.format) {
    case DataFormat::kImageFolder:
      d = read_image_folder(where.path, ImageFolderOptions{options.class_names, options.channels});
      break;
    case DataFormat::kNpz: d = read_npz(where.path, npy_options(options)); break;
    case DataFormat::kNpy: d = read_npy(where.path, where.labels_path, npy_options(options)); break;
    case DataFormat::kCsv: d = read_csv(where.path, csv_options(options)); break;
    case DataFormat::kIdx: break;
  }
  if (!options.select) return d;
  const std::vector<std::size_t> kept = options.select(d.labels);
  return d.subset(kept);
}

void check_same_shape(const Dataset& a, const std::string& a_name, const Dataset& b, const std::string& b_name) {
  const bool same = a.dim == b.dim && a.channels == b.channels && a.height == b.height && a.width == b.width;
  if (!same) {
    throw DataError(b_name + ": " + shape_text(b) + ", but " + a_name + " has " + shape_text(a));
  }
}

TrainAndTest load_train_and_test(const std::string& train_path, const std::string& test_path,
                                 const DataOptions& options) {
  TrainAndTest out;
  out.train = load_dataset(train_path, options);
  if (test_path.empty()) return out;
  DataOptions test_options = options;
  test_options.select = {};
  test_options.class_names = out.train.class_names;
  if (options.class_names.empty()) test_options.classes_from = "the training data " + train_path;
  test_options.schema = out.train.table;
  test_options.schema_from = train_path;
  test_options.standardization = out.train.standardization;
  if (out.train.channels > 0) test_options.channels = out.train.channels;
  out.test = load_dataset(test_path, test_options);
  check_same_shape(out.train, train_path, out.test, test_path);
  return out;
}

}  // namespace meridian::models::data

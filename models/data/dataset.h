// A labelled dataset held in memory: row-major features and integer class labels. Readers
// (idx_reader.h, csv_reader.h) produce it; partition.h splits it across sites; the trainer batches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/data/standardization.h"
#include "models/data/tabular_schema.h"

namespace meridian::models::data {

// Thrown by readers and partitioners for bad input; what() names the file and the problem.
class DataError : public error::UserError {
 public:
  using error::UserError::UserError;
};

struct Dataset {
  std::size_t rows = 0;
  std::size_t dim = 0;               // features per row (784 for 28x28 images)
  std::size_t classes = 0;           // labels are in [0, classes)
  std::vector<float> features;       // (rows, dim), row-major
  std::vector<std::int32_t> labels;  // (rows)
  // Image geometry when the rows are images (channels, height, width); all 0 for tabular data.
  std::size_t channels = 0, height = 0, width = 0;
  // Human-readable name of each class, indexed by label; empty when the source has none. For CSV data
  // these are the label column's values, so a test file can be mapped with the training file's names.
  std::vector<std::string> class_names;
  // The name of each feature, in order, where the source names them (a CSV header's columns, the
  // label column left out); empty otherwise. Part of the schema every site of a federation must share.
  std::vector<std::string> feature_names;
  // The per-feature scaling already applied to `features` (empty when none was), so a test set can be
  // scaled with the training set's statistics.
  Standardization standardization;
  // For a table read with a header: how its columns became the features (tabular_schema.h), so that a
  // test file, a peer and an exported model use the same.
  std::optional<TableSchema> table;

  const float* row(std::size_t i) const { return features.data() + i * dim; }

  // A dataset of the given rows, in the given order, with the same dim, classes, geometry, class
  // and feature names and standardization. Throws DataError when an index is >= rows.
  Dataset subset(std::span<const std::size_t> row_indices) const;
};

}  // namespace meridian::models::data

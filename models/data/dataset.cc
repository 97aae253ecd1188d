#include "models/data/dataset.h"

#include <algorithm>

namespace meridian::models::data {

Dataset Dataset::subset(std::span<const std::size_t> row_indices) const {
  Dataset out;
  out.rows = row_indices.size();
  out.dim = dim;
  out.classes = classes;
  out.channels = channels;
  out.height = height;
  out.width = width;
  out.class_names = class_names;
  out.feature_names = feature_names;
  out.standardization = standardization;
  out.table = table;
  out.features.resize(out.rows * dim);
  out.labels.resize(out.rows);
  for (std::size_t i = 0; i < row_indices.size(); ++i) {
    const std::size_t r = row_indices[i];
    if (r >= rows) {
      throw DataError("subset: row " + std::to_string(r) + " is out of range (dataset has " + std::to_string(rows) +
                      " rows)");
    }
    std::copy_n(row(r), dim, out.features.data() + i * dim);
    out.labels[i] = labels[r];
  }
  return out;
}

}  // namespace meridian::models::data

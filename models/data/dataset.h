// A labelled dataset held in memory: row-major features and integer class labels. Readers
// (idx_reader.h, csv_reader.h) produce it; partition.h splits it across sites; the trainer batches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace meridian::models::data {

// Thrown by readers and partitioners for bad input; what() names the file and the problem.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Dataset {
  std::size_t rows = 0;
  std::size_t dim = 0;        // features per row (784 for 28x28 images)
  std::size_t classes = 0;    // labels are in [0, classes)
  std::vector<float> features;       // (rows, dim), row-major
  std::vector<std::int32_t> labels;  // (rows)
  // Image geometry when the rows are images (channels, height, width); all 0 for tabular data.
  std::size_t channels = 0, height = 0, width = 0;

  const float* row(std::size_t i) const { return features.data() + i * dim; }
};

}  // namespace meridian::models::data

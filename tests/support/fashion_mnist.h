// Whether the tests that train on Fashion-MNIST can run here, and the one guard they start with. They
// read Debian's dataset-fashion-mnist where the commands look by default, so the one probe asks for
// exactly the files the loader reads.
#pragma once

#include <filesystem>
#include <string>

#include "models/data/idx_reader.h"

namespace meridian::tests {

// models::data::kDebianFashionMnistDir, where `meridian train`, `start` and `simulate` read it by default.
inline std::filesystem::path fashion_mnist_dir() { return models::data::kDebianFashionMnistDir; }

// True when the four IDX files of the training and the test set are there, gzipped or unpacked, as
// models::data::load_fashion_mnist wants them.
inline bool have_fashion_mnist() {
  for (const char* stem :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    const auto file = fashion_mnist_dir() / stem;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file.string() + ".gz", ec) && !std::filesystem::is_regular_file(file, ec))
      return false;
  }
  return true;
}

}  // namespace meridian::tests

// Ends the running test case with a "SKIPPED: ..." warning (counted as a skip by scripts/run-tests) when
// Fashion-MNIST is not installed. For the top of a TEST_CASE body, or of a helper that returns void.
#define MERIDIAN_SKIP_WITHOUT_FASHION_MNIST()                                                            \
  do {                                                                                                   \
    if (!::meridian::tests::have_fashion_mnist()) {                                                      \
      WARN("SKIPPED: Fashion-MNIST is not installed at " << ::meridian::tests::fashion_mnist_dir().string() \
                                                        << " (dataset-fashion-mnist)");                  \
      return;                                                                                            \
    }                                                                                                    \
  } while (false)

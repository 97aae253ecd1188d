// A stop-gap Fashion-MNIST reader for `meridian train` until models/data/idx_reader.h (being written
// on another branch) lands; it has the same signature as models::data::load_fashion_mnist, so the
// switch is one include and one namespace. Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
// (gzip or raw). Throws models::data::DataError naming the file and the problem.
#pragma once

#include <string>

#include "models/data/dataset.h"

namespace meridian::cli {

models::data::Dataset load_fashion_mnist(const std::string& dir, bool train);

}  // namespace meridian::cli

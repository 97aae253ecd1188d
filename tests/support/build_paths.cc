#include "tests/support/build_paths.h"

namespace meridian::tests {

const char* source_dir() { return MERIDIAN_SOURCE_DIR; }

const char* meridian_binary() { return MERIDIAN_BINARY; }

const char* nvcc_path() { return MERIDIAN_NVCC; }

}  // namespace meridian::tests

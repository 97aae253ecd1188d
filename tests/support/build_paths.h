// Where the tests find the source tree, the built daemon and nvcc.
//
// The paths are compiled into tests/support/build_paths.cc alone, not into every test file, so that the
// objects of all other test files are the same in every checkout and a compiler cache shares them.
#pragma once

namespace meridian::tests {

// The project's source tree (absolute), e.g. for files under examples/ and tests/fuzz/.
const char* source_dir();

// The `meridian` binary of this build (absolute).
const char* meridian_binary();

// The nvcc this build found, or "" when there is none.
const char* nvcc_path();

}  // namespace meridian::tests

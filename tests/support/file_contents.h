// Reading a whole file in a test.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace meridian::tests {

// The bytes of `file`, unchanged (binary); "" when it does not exist or cannot be read, so that a test
// can poll for a file that another process writes.
inline std::string file_contents(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace meridian::tests

// A file holding the current fuzz input, for loaders that read a path rather than bytes. One file per
// process and name (in the temporary directory, named with the process id), rewritten for every input
// and removed when the process ends normally.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace meridian::tests {

class FuzzInputFile {
 public:
  // `name` ends the file's name, so its extension can tell a loader the format (".npz", ".csv").
  explicit FuzzInputFile(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("meridian-fuzz-" + std::to_string(::getpid()) + "-" + name)) {}
  ~FuzzInputFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  FuzzInputFile(const FuzzInputFile&) = delete;
  FuzzInputFile& operator=(const FuzzInputFile&) = delete;

  // Replaces the file's content with `size` bytes at `data` and returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace meridian::tests

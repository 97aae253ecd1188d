// A fresh directory under /tmp for one test, removed with everything in it when the object goes out of
// scope. Short paths on purpose: ipc:// endpoints inside it must fit in a Unix socket address (108 bytes).
// One thread uses an instance.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace meridian::tests {

class TempDir {
 public:
  // Throws std::runtime_error when the directory cannot be made.
  TempDir() {
    std::string pattern = "/tmp/mrdn-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string file(std::string_view name) const { return (path_ / name).string(); }

  // Writes `bytes` to the file `name` and returns its path. Throws std::runtime_error when it cannot.
  std::string write(std::string_view name, std::string_view bytes) const {
    const std::string p = file(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + p);
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace meridian::tests

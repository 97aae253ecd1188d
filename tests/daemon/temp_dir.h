// A fresh directory under /tmp for one test, removed with everything in it when the test ends.
// Short paths on purpose: ipc:// endpoints must fit in a Unix socket address (108 bytes).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace meridian::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/mrdn-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace meridian::testing

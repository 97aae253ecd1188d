// A zip archive opened for reading through libzip (Debian's libzip-dev): the container of NumPy's
// .npz files. Stored and deflated entries are both read; libzip checks each entry's CRC-32 as it is
// read to the end, so a damaged entry is reported rather than returned.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

struct zip;

namespace meridian::models::data {

// Owns one open archive (released by the destructor); move-only.
// Thread-safety: none; one thread reads one ZipArchive.
class ZipArchive {
 public:
  // Opens `path` read-only with libzip's consistency checks. Throws DataError "<path>: cannot open"
  // (missing or unreadable file) or "<path>: not a readable zip archive: <libzip's reason>"
  // (truncated, not a zip, inconsistent central directory).
  explicit ZipArchive(std::string path);
  ~ZipArchive();
  ZipArchive(ZipArchive&&) noexcept;
  ZipArchive& operator=(ZipArchive&&) noexcept;

  // The entry names, in the archive's order.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const;

  // The whole uncompressed content of entry `name`. Throws DataError naming the file and the entry
  // when it is absent, when its announced size is more than its compressed bytes can hold, and when
  // it cannot be inflated or fails its CRC check.
  std::string read(const std::string& name) const;

  const std::string& path() const { return path_; }

 private:
  struct Close {
    void operator()(zip* archive) const;
  };
  std::string path_;
  std::unique_ptr<zip, Close> archive_;
  std::vector<std::string> names_;
};

}  // namespace meridian::models::data

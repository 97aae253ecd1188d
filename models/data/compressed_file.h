// A file read through zlib: a gzip file is inflated while it is read, any other file passes through
// unchanged. zlib's transparent mode makes the choice from the gzip magic (1f 8b) at the start of the
// file, so callers never look at the file name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <zlib.h>

namespace meridian::models::data {

// Owns one open zlib file handle (closed by the destructor); move-only.
// Thread-safety: none; one thread reads one CompressedFile.
class CompressedFile {
 public:
  // Opens `path`. Throws DataError ("<path>: cannot open: <reason>") when it is missing or unreadable.
  explicit CompressedFile(std::string path);
  ~CompressedFile();
  CompressedFile(CompressedFile&& other) noexcept;
  CompressedFile& operator=(CompressedFile&& other) noexcept;
  CompressedFile(const CompressedFile&) = delete;
  CompressedFile& operator=(const CompressedFile&) = delete;

  // Reads up to `n` decompressed bytes into `dst` and returns how many were read; fewer than `n` only
  // at the end of the data. Throws DataError naming the file when the gzip stream is corrupt or ends
  // in the middle (a truncated .gz).
  std::size_t read(void* dst, std::size_t n);

  // Reads exactly `n` bytes; throws DataError "<path>: truncated: <what> needs N bytes, only M left".
  void read_exact(void* dst, std::size_t n, const std::string& what);

  // Whether the content is gzip. Valid after the first read (zlib looks at the magic lazily).
  bool compressed() const;

  // Size of the file on disk (compressed size for a .gz).
  std::uintmax_t size_on_disk() const { return size_on_disk_; }

  // An upper bound on how many bytes read() can still return in total, from the size on disk
  // (deflate expands at most about 1032:1). Lets readers reject absurd headers before allocating.
  std::uintmax_t max_content_bytes() const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  std::uintmax_t size_on_disk_ = 0;
};

}  // namespace meridian::models::data

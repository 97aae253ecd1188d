#include "models/data/compressed_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "models/data/dataset.h"

namespace meridian::models::data {

namespace {

// Deflate's best case is about 1032:1 (zlib's FAQ); a little slack covers the gzip header.
constexpr std::uintmax_t kMaxDeflateRatio = 1032;
constexpr std::uintmax_t kGzipSlack = 1024;

}  // namespace

CompressedFile::CompressedFile(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) throw DataError(path_ + ": cannot open: no such file");
  if (std::filesystem::is_directory(path_, ec)) throw DataError(path_ + ": cannot open: is a directory");
  size_on_disk_ = std::filesystem::file_size(path_, ec);
  if (ec) throw DataError(path_ + ": cannot open: " + ec.message());
  errno = 0;
  file_ = gzopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    throw DataError(path_ + ": cannot open: " + (errno != 0 ? std::strerror(errno) : "zlib out of memory"));
  }
  // Large reads (whole images blocks); a bigger buffer halves the number of inflate calls.
  gzbuffer(file_, 1 << 17);
}

CompressedFile::~CompressedFile() {
  if (file_ != nullptr) gzclose(file_);
}

CompressedFile::CompressedFile(CompressedFile&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)), size_on_disk_(other.size_on_disk_) {}

CompressedFile& CompressedFile::operator=(CompressedFile&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) gzclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    size_on_disk_ = other.size_on_disk_;
  }
  return *this;
}

std::size_t CompressedFile::read(void* dst, std::size_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t done = 0;
  // gzread takes an unsigned count; read in slices well below its limit.
  constexpr std::size_t kSlice = std::size_t{1} << 30;
  while (done < n) {
    const auto want = static_cast<unsigned>(std::min(n - done, kSlice));
    const int got = gzread(file_, out + done, want);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file_, &code);
      throw DataError(path_ + ": corrupt gzip data: " + (msg != nullptr ? msg : "unknown zlib error"));
    }
    if (got == 0) {
      // gzread reports a gzip stream that stops early as a short read plus Z_BUF_ERROR.
      int code = Z_OK;
      const char* msg = gzerror(file_, &code);
      if (code != Z_OK) {
        throw DataError(path_ + ": truncated gzip data: " + (msg != nullptr ? msg : "unexpected end of file"));
      }
      break;
    }
    done += static_cast<std::size_t>(got);
  }
  return done;
}

void CompressedFile::read_exact(void* dst, std::size_t n, const std::string& what) {
  const std::size_t got = read(dst, n);
  if (got != n) {
    throw DataError(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes, only " +
                    std::to_string(got) + " left");
  }
}

bool CompressedFile::compressed() const { return gzdirect(file_) == 0; }

std::uintmax_t CompressedFile::max_content_bytes() const {
  if (!compressed()) return size_on_disk_;
  if (size_on_disk_ > std::numeric_limits<std::uintmax_t>::max() / kMaxDeflateRatio - kGzipSlack) {
    return std::numeric_limits<std::uintmax_t>::max();
  }
  return size_on_disk_ * kMaxDeflateRatio + kGzipSlack;
}

}  // namespace meridian::models::data

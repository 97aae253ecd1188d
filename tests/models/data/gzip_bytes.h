// Gzip-compresses a byte string in memory (zlib, gzip wrapper), so tests can write .gz files and
// cut them short.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <zlib.h>

namespace meridian::tests {

inline std::string gzip_bytes(std::string_view raw) {
  z_stream zs{};
  // windowBits 15 + 16 selects the gzip header and trailer instead of the zlib ones.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out(deflateBound(&zs, raw.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  out.resize(zs.total_out);
  return out;
}

}  // namespace meridian::tests

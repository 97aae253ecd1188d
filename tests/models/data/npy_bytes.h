// Builds NumPy .npy byte strings and .npz archives in tests, so readers can be fed exact and broken
// files without Python.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <zip.h>

namespace meridian::tests {

// A .npy file: magic, version `major`.0, the header dict NumPy writes (padded so the data starts at
// a multiple of 64), then `data`. `shape` is the tuple's text, e.g. "(2, 3)" or "(4,)".
inline std::string npy_bytes(std::string_view descr, std::string_view shape, std::string_view data,
                             std::string_view fortran_order = "False", int major = 1) {
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran_order) +
                       ", 'shape': " + std::string(shape) + ", }";
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t len = header.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + std::string(data);
}

// The raw little-endian bytes of a vector of numbers.
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Writes a zip archive at `path` with the given (name, content) entries, deflated or stored.
inline void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries,
                      bool deflate) {
  int error = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (archive == nullptr) throw std::runtime_error("zip_open failed for " + path);
  for (const auto& [name, content] : entries) {
    zip_source_t* source = zip_source_buffer(archive, content.data(), content.size(), 0);
    const zip_int64_t index = source != nullptr ? zip_file_add(archive, name.c_str(), source, ZIP_FL_OVERWRITE) : -1;
    if (index < 0) {
      zip_source_free(source);
      zip_discard(archive);
      throw std::runtime_error("zip_file_add failed for " + name);
    }
    zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(archive) != 0) {
    zip_discard(archive);
    throw std::runtime_error("zip_close failed for " + path);
  }
}

}  // namespace meridian::tests

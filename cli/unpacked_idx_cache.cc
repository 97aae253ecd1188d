#include "cli/unpacked_idx_cache.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "error/error.h"
#include "models/data/compressed_file.h"

namespace meridian::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 4> kStems = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// Names the copy after what it was made from: a source file replaced or touched gets a new copy.
std::string cache_key(const fs::path& data_dir) {
  std::ostringstream identity;
  identity << fs::absolute(data_dir).lexically_normal().string();
  for (const char* stem : kStems) {
    const fs::path gz = data_dir / (std::string(stem) + ".gz");
    identity << '|' << stem << ':' << fs::file_size(gz) << ':' << fs::last_write_time(gz).time_since_epoch().count();
  }
  std::ostringstream name;
  name << "idx-" << std::hex << std::hash<std::string>{}(identity.str());
  return name.str();
}

void inflate(const fs::path& gz, const fs::path& raw) {
  models::data::CompressedFile in(gz.string());
  std::ofstream out(raw, std::ios::binary | std::ios::trunc);
  if (!out) throw error::UserError("cannot create " + raw.string());
  std::vector<char> block(std::size_t{1} << 20);
  while (const std::size_t n = in.read(block.data(), block.size()))
    out.write(block.data(), static_cast<std::streamsize>(n));
  out.close();
  if (!out) throw error::UserError("cannot write " + raw.string());
}

bool complete(const fs::path& dir) {
  std::error_code ec;
  for (const char* stem : kStems)
    if (!fs::is_regular_file(dir / stem, ec)) return false;
  return true;
}

}  // namespace

fs::path default_cache_root() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "meridian";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "meridian";
  return {};
}

fs::path unpacked_idx_dir(const fs::path& data_dir, const fs::path& cache_root, std::string& note) {
  note.clear();
  if (cache_root.empty()) {
    note = "no cache directory (neither XDG_CACHE_HOME nor HOME is set)";
    return data_dir;
  }
  std::error_code ec;
  for (const char* stem : kStems) {
    if (!fs::is_regular_file(data_dir / (std::string(stem) + ".gz"), ec)) {
      note = "no " + std::string(stem) + ".gz in " + data_dir.string();
      return data_dir;
    }
  }
  fs::path final_dir, partial;
  try {
    final_dir = cache_root / cache_key(data_dir);
    if (complete(final_dir)) return final_dir;
    fs::create_directories(cache_root);
    partial = cache_root / (final_dir.filename().string() + ".partial-" + std::to_string(::getpid()));
    fs::remove_all(partial);
    fs::create_directories(partial);
    for (const char* stem : kStems) inflate(data_dir / (std::string(stem) + ".gz"), partial / stem);
    fs::rename(partial, final_dir, ec);
    // Another simulate may have finished the same copy first: then its copy is used.
    if (ec && !complete(final_dir)) throw fs::filesystem_error("cannot rename to " + final_dir.string(), ec);
    fs::remove_all(partial, ec);
    return final_dir;
  } catch (const std::exception& e) {
    if (!partial.empty()) fs::remove_all(partial, ec);
    note = e.what();
    return data_dir;
  }
}

}  // namespace meridian::cli

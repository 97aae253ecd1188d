#include "models/data/zip_archive.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include <zip.h>

#include "models/data/dataset.h"

namespace meridian::models::data {

namespace {

std::string libzip_reason(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string reason = zip_error_strerror(&error);
  zip_error_fini(&error);
  return reason;
}

}  // namespace

void ZipArchive::Close::operator()(zip* archive) const {
  // Read-only: discard frees the handle without the write-back zip_close would attempt.
  zip_discard(archive);
}

ZipArchive::ZipArchive(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_, ec)) {
    throw DataError(path_ +
                    ": cannot open: " + (std::filesystem::exists(path_, ec) ? "not a regular file" : "no such file"));
  }
  int code = 0;
  archive_.reset(zip_open(path_.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!archive_) {
    throw DataError(path_ + ": not a readable zip archive (an .npz is one): " + libzip_reason(code));
  }
  const zip_int64_t entries = zip_get_num_entries(archive_.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    const char* name = zip_get_name(archive_.get(), static_cast<zip_uint64_t>(i), 0);
    if (name == nullptr) {
      throw DataError(path_ + ": entry " + std::to_string(i) +
                      " has no readable name: " + zip_strerror(archive_.get()));
    }
    names_.emplace_back(name);
  }
}

ZipArchive::~ZipArchive() = default;
ZipArchive::ZipArchive(ZipArchive&&) noexcept = default;
ZipArchive& ZipArchive::operator=(ZipArchive&&) noexcept = default;

bool ZipArchive::contains(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

std::string ZipArchive::read(const std::string& name) const {
  const std::string where = path_ + ": entry '" + name + "'";
  const zip_int64_t index = zip_name_locate(archive_.get(), name.c_str(), 0);
  if (index < 0) throw DataError(where + " is missing");
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(archive_.get(), static_cast<zip_uint64_t>(index), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    throw DataError(where + ": cannot read its size: " + zip_strerror(archive_.get()));
  }
  // The sizes come from the archive's directory: refuse compressed bytes the archive cannot hold, and a
  // size those bytes cannot expand to (deflate expands at most about 1032:1), before allocating, so a
  // damaged or crafted directory cannot ask for terabytes.
  std::error_code ignored;
  const std::uintmax_t archive_bytes = std::filesystem::file_size(path_, ignored);
  if (!(st.valid & ZIP_STAT_COMP_SIZE) || ignored || st.comp_size > archive_bytes) {
    throw DataError(where + ": announces " + std::to_string(st.comp_size) + " compressed bytes, more than the " +
                    std::to_string(archive_bytes) + " bytes of the archive");
  }
  if (st.size > st.comp_size * 1032 + 64) {
    throw DataError(where + ": announces " + std::to_string(st.size) + " bytes but holds only " +
                    std::to_string(st.comp_size) + " compressed bytes");
  }
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(
      zip_fopen_index(archive_.get(), static_cast<zip_uint64_t>(index), 0), zip_fclose);
  if (!file) throw DataError(where + ": cannot open: " + zip_strerror(archive_.get()));
  std::string content(static_cast<std::size_t>(st.size), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const zip_int64_t got = zip_fread(file.get(), content.data() + done, content.size() - done);
    if (got < 0) throw DataError(where + ": cannot be read: " + zip_file_strerror(file.get()));
    if (got == 0) {
      throw DataError(where + ": truncated: holds " + std::to_string(done) + " of the " +
                      std::to_string(content.size()) + " bytes the archive announces");
    }
    done += static_cast<std::size_t>(got);
  }
  // One more read reaches the end of the entry, where libzip compares the CRC-32.
  char extra = 0;
  if (zip_fread(file.get(), &extra, 1) < 0) {
    throw DataError(where + ": cannot be read: " + zip_file_strerror(file.get()));
  }
  return content;
}

}  // namespace meridian::models::data

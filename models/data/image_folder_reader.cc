#include "models/data/image_folder_reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "models/data/image_file.h"

namespace meridian::models::data {

namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool hidden(const fs::path& p) { return p.filename().string().starts_with('.'); }

bool image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!hidden(it->path())) entries.push_back(it->path());
  }
  if (ec) throw DataError(dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(entries.begin(), entries.end());
  return entries;
}

struct Item {
  std::string path;
  std::int32_t label = 0;
  ImageInfo info;
};

std::string size_text(const ImageInfo& i) { return std::to_string(i.width) + "x" + std::to_string(i.height); }

// The size most images have (the first image's on a tie); every other image is an offender.
void check_sizes(const std::string& dir, const std::vector<Item>& items) {
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> counts;
  for (const Item& it : items) ++counts[{it.info.width, it.info.height}];
  std::pair<std::size_t, std::size_t> common{items[0].info.width, items[0].info.height};
  for (const auto& [size, n] : counts) {
    if (n > counts[common]) common = size;
  }
  std::vector<std::string> offenders;
  std::size_t total = 0;
  for (const Item& it : items) {
    if (std::pair{it.info.width, it.info.height} == common) continue;
    if (++total <= 10) offenders.push_back(it.path + " is " + size_text(it.info));
  }
  if (total == 0) return;
  throw DataError(dir + ": " + std::to_string(total) + " of " + std::to_string(items.size()) +
                  " images differ from the size most of them have (" + std::to_string(common.first) + "x" +
                  std::to_string(common.second) + ", width x height): " + join(offenders) +
                  (total > offenders.size() ? ", and " + std::to_string(total - offenders.size()) + " more" : "") +
                  "; resize or remove them (images are not resized when read)");
}

}  // namespace

Dataset read_image_folder(const std::string& dir, const ImageFolderOptions& options) {
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    throw DataError(dir + ": cannot read images as " + std::to_string(options.channels) +
                    " channels (expected 1, 3, or 0 to follow the images)");
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError(dir + ": " + (fs::exists(dir, ec) ? "not a folder" : "no such folder"));
  }
  std::vector<fs::path> class_dirs;
  for (const fs::path& p : sorted_entries(dir)) {
    if (fs::is_directory(p, ec)) class_dirs.push_back(p);
  }
  if (class_dirs.empty()) {
    throw DataError(dir +
                    ": holds no class subfolder (expected one subfolder per class, each holding PNG or JPEG "
                    "images)");
  }
  Dataset d;
  d.class_names = options.class_names;
  if (d.class_names.empty()) {
    for (const fs::path& p : class_dirs) d.class_names.push_back(p.filename().string());
  }
  std::vector<Item> items;
  for (const fs::path& class_dir : class_dirs) {
    const std::string name = class_dir.filename().string();
    const auto at = std::find(d.class_names.begin(), d.class_names.end(), name);
    if (at == d.class_names.end()) {
      throw DataError(class_dir.string() + ": subfolder '" + name + "' is not one of the " +
                      std::to_string(d.class_names.size()) + " classes: " + join(d.class_names));
    }
    const auto label = static_cast<std::int32_t>(at - d.class_names.begin());
    for (const fs::path& file : sorted_entries(class_dir)) {
      if (fs::is_directory(file, ec)) {
        throw DataError(file.string() + ": a folder inside the class folder '" + name +
                        "' (expected only images there; one level of class folders)");
      }
      if (!image_extension(file)) {
        throw DataError(file.string() + ": not an image file name (expected .png, .jpg or .jpeg in a class folder)");
      }
      items.push_back({file.string(), label, {}});
    }
  }
  if (items.empty()) throw DataError(dir + ": the class subfolders hold no images");
  // Every header first: a folder with mixed sizes is refused before anything is decoded, with all
  // offenders named at once.
  bool any_color = false;
  for (Item& it : items) {
    it.info = probe_image(it.path);
    any_color = any_color || it.info.color;
  }
  check_sizes(dir, items);
  d.channels = options.channels != 0 ? options.channels : any_color ? 3 : 1;
  d.width = items[0].info.width;
  d.height = items[0].info.height;
  d.dim = d.channels * d.height * d.width;
  d.rows = items.size();
  d.classes = d.class_names.size();
  d.features.resize(d.rows * d.dim);
  d.labels.resize(d.rows);
  const std::size_t plane = d.height * d.width;
  for (std::size_t r = 0; r < d.rows; ++r) {
    ImageInfo decoded;
    const auto pixels = decode_image(items[r].path, d.channels, &decoded);
    if (decoded.width != d.width || decoded.height != d.height) {
      throw DataError(items[r].path + ": decodes to " + size_text(decoded) + " but its header said " +
                      size_text(items[r].info));
    }
    // Decoded (y, x, c) to the Dataset's (c, y, x).
    float* out = d.features.data() + r * d.dim;
    for (std::size_t px = 0; px < plane; ++px) {
      for (std::size_t c = 0; c < d.channels; ++c) {
        out[c * plane + px] = static_cast<float>(pixels[px * d.channels + c]) * (1.0f / 255.0f);
      }
    }
    d.labels[r] = items[r].label;
  }
  return d;
}

}  // namespace meridian::models::data

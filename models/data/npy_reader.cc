#include "models/data/npy_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "error/error.h"
#include "models/checked_size.h"
#include "models/data/compressed_file.h"
#include "models/data/zip_archive.h"

namespace meridian::models::data {

namespace {

std::string read_whole(const std::string& path) {
  CompressedFile file(path);
  std::string bytes;
  std::string chunk(1 << 20, '\0');
  while (true) {
    const std::size_t got = file.read(chunk.data(), chunk.size());
    bytes.append(chunk, 0, got);
    if (got < chunk.size()) break;
  }
  return bytes;
}

// The element at `index` as raw bits, in host order (the file's order is little- or big-endian).
std::uint64_t element_bits(const NpyArray& a, std::size_t index) {
  const auto* p = reinterpret_cast<const unsigned char*>(a.data.data()) + index * a.item_size;
  std::uint64_t v = 0;
  if (a.big_endian) {
    for (std::size_t i = 0; i < a.item_size; ++i) v = (v << 8) | p[i];
  } else {
    for (std::size_t i = a.item_size; i-- > 0;) v = (v << 8) | p[i];
  }
  return v;
}

float element_as_float(const NpyArray& a, std::size_t index) {
  if (a.kind == 'u') return static_cast<float>(a.data[index] & 0xff) * (1.0f / 255.0f);
  const std::uint64_t bits = element_bits(a, index);
  if (a.item_size == 4) {
    float f;
    const auto b32 = static_cast<std::uint32_t>(bits);
    std::memcpy(&f, &b32, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return static_cast<float>(d);
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A text label without NumPy's trailing NUL padding; 'U' is UTF-32, re-encoded as UTF-8.
std::string text_label(const NpyArray& a, std::size_t index) {
  const char* p = a.data.data() + index * a.item_size;
  std::string out;
  if (a.kind == 'S') {
    out.assign(p, strnlen(p, a.item_size));
    return out;
  }
  for (std::size_t c = 0; c < a.item_size / 4; ++c) {
    std::uint32_t cp = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const auto byte = static_cast<std::uint32_t>(static_cast<unsigned char>(p[c * 4 + i]));
      cp |= a.big_endian ? byte << (8 * (3 - i)) : byte << (8 * i);
    }
    if (cp == 0) break;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

void fill_features(Dataset& d, const NpyArray& f, const std::string& where, const NpyOptions& options) {
  const bool float_type = f.kind == 'f' && (f.item_size == 4 || f.item_size == 8);
  const bool byte_type = f.kind == 'u' && f.item_size == 1;
  if (!float_type && !byte_type) {
    throw DataError(where + ": features have dtype '" + f.descr +
                    "'; expected float32 ('<f4'), float64 ('<f8') or uint8 ('|u1')");
  }
  const auto& s = f.shape;
  const std::size_t ndim = s.size();
  if (ndim < 2 || ndim > 4) {
    throw DataError(where + ": features have shape " + f.shape_text() +
                    "; expected (N, F), (N, H, W), (N, C, H, W) or (N, H, W, C)");
  }
  if (ndim == 2 && options.layout != ArrayLayout::kUnstated) {
    throw DataError(where + ": features have shape " + f.shape_text() + ", a table (N, F), but the image layout " +
                    to_string(options.layout) + " was stated");
  }
  if (ndim == 4 && options.layout == ArrayLayout::kUnstated) {
    throw DataError(where + ": features have shape " + f.shape_text() +
                    ": state the layout of 4-D images, nchw (N, C, H, W) or nhwc (N, H, W, C)");
  }
  if (ndim == 3) {
    d.channels = 1, d.height = s[1], d.width = s[2];
  } else if (ndim == 4 && options.layout == ArrayLayout::kNchw) {
    d.channels = s[1], d.height = s[2], d.width = s[3];
  } else if (ndim == 4) {
    d.height = s[1], d.width = s[2], d.channels = s[3];
  }
  if (ndim == 4 && d.channels != 1 && d.channels != 3) {
    throw DataError(where + ": features have shape " + f.shape_text() + ", which as " + to_string(options.layout) +
                    " has " + std::to_string(d.channels) + " channels; expected 1 or 3");
  }
  d.rows = s[0];
  d.dim = f.count() / std::max<std::size_t>(1, d.rows);
  if (d.rows == 0) throw DataError(where + ": features have shape " + f.shape_text() + ": no rows");
  if (d.dim == 0) throw DataError(where + ": features have shape " + f.shape_text() + ": no features per row");
  d.features.resize(d.rows * d.dim);
  const bool transpose = ndim == 4 && options.layout == ArrayLayout::kNhwc;
  for (std::size_t r = 0; r < d.rows; ++r) {
    float* out = d.features.data() + r * d.dim;
    const std::size_t base = r * d.dim;
    for (std::size_t i = 0; i < d.dim; ++i) {
      const float v = element_as_float(f, base + i);
      if (!std::isfinite(v)) {
        throw DataError(where + ": row " + std::to_string(r) + ", value " + std::to_string(i) + " (in file order) is " +
                        (std::isnan(v) ? "NaN" : "infinite or beyond float32"));
      }
      if (transpose) {
        // File order (y, x, c) to the Dataset's (c, y, x).
        const std::size_t c = i % d.channels, px = i / d.channels;
        out[c * d.height * d.width + px] = v;
      } else {
        out[i] = v;
      }
    }
  }
}

void fill_labels(Dataset& d, const NpyArray& l, const std::string& where, const std::string& features_where,
                 const NpyOptions& options) {
  const bool column = l.shape.size() == 2 && l.shape[1] == 1;
  if (l.shape.size() != 1 && !column) {
    throw DataError(where + ": labels have shape " + l.shape_text() + "; expected (N,) or (N, 1)");
  }
  if (l.shape[0] != d.rows) {
    throw DataError(where + ": holds " + std::to_string(l.shape[0]) + " labels but " + features_where + " holds " +
                    std::to_string(d.rows) + " rows");
  }
  d.labels.resize(d.rows);
  if (l.kind == 'i' || l.kind == 'u') {
    if (l.item_size > 8) throw DataError(where + ": labels have dtype '" + l.descr + "'; integers are at most 8 bytes");
    const std::size_t known = options.class_names.size();
    std::int64_t max = -1;
    for (std::size_t r = 0; r < d.rows; ++r) {
      std::uint64_t bits = element_bits(l, r);
      if (l.kind == 'i' && l.item_size < 8 && (bits >> (8 * l.item_size - 1)) != 0) bits |= ~0ULL << (8 * l.item_size);
      std::int64_t v;
      std::memcpy(&v, &bits, 8);
      const bool negative = l.kind == 'i' && v < 0;
      // Without a class list the largest label sets the number of classes (and of their names).
      const std::uint64_t limit = known > 0 ? known : kMaxClasses;
      if (negative || bits >= limit) {
        const std::string value = l.kind == 'u' ? std::to_string(bits) : std::to_string(v);
        throw DataError(where + ": label " + value + " of row " + std::to_string(r) + " is out of range (" +
                        (known > 0 ? "expected 0.." + std::to_string(known - 1) + " for the " + std::to_string(known) +
                                         " classes " + join(options.class_names)
                                   : "expected a class number from 0 to " + std::to_string(kMaxClasses - 1)) +
                        ")");
      }
      d.labels[r] = static_cast<std::int32_t>(v);
      max = std::max<std::int64_t>(max, v);
    }
    d.class_names = options.class_names;
    for (auto c = static_cast<std::int64_t>(known); c <= max; ++c) d.class_names.push_back(std::to_string(c));
  } else if (l.kind == 'U' || l.kind == 'S') {
    std::vector<std::string> text(d.rows);
    for (std::size_t r = 0; r < d.rows; ++r) text[r] = text_label(l, r);
    d.class_names = options.class_names;
    if (d.class_names.empty()) {
      d.class_names = text;
      std::sort(d.class_names.begin(), d.class_names.end());
      d.class_names.erase(std::unique(d.class_names.begin(), d.class_names.end()), d.class_names.end());
    }
    std::map<std::string, std::int32_t> index;
    for (std::size_t c = 0; c < d.class_names.size(); ++c)
      index.emplace(d.class_names[c], static_cast<std::int32_t>(c));
    for (std::size_t r = 0; r < d.rows; ++r) {
      const auto it = index.find(text[r]);
      if (it == index.end()) {
        throw DataError(where + ": row " + std::to_string(r) + ": label '" + text[r] + "' is not one of the " +
                        std::to_string(d.class_names.size()) + " known classes: " + join(d.class_names));
      }
      d.labels[r] = it->second;
    }
  } else {
    throw DataError(where + ": labels have dtype '" + l.descr + "'; expected integers or text ('<U', '|S')");
  }
  d.classes = d.class_names.size();
}

// The entry of an .npz that holds array `key`: np.savez stores array "x" as "x.npy".
std::string npz_entry(const ZipArchive& archive, const std::string& key, const char* role, const char* option) {
  for (const std::string& name : {key + ".npy", key}) {
    if (archive.contains(name)) return name;
  }
  std::vector<std::string> arrays;
  for (const auto& n : archive.names()) arrays.push_back(n.ends_with(".npy") ? n.substr(0, n.size() - 4) : n);
  throw DataError(archive.path() + ": no array '" + key + "' for the " + role + " (the archive holds: " + join(arrays) +
                  "); name it with " + option);
}

}  // namespace

ArrayLayout parse_array_layout(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "nchw") return ArrayLayout::kNchw;
  if (lower == "nhwc") return ArrayLayout::kNhwc;
  throw error::UserError("image layout '" + std::string(text) +
                         "' is not known (expected nchw: (N, C, H, W), or nhwc: (N, H, W, C))");
}

const char* to_string(ArrayLayout layout) {
  switch (layout) {
    case ArrayLayout::kNchw: return "nchw";
    case ArrayLayout::kNhwc: return "nhwc";
    case ArrayLayout::kUnstated: break;
  }
  return "unstated";
}

Dataset dataset_from_arrays(const NpyArray& features, const std::string& features_where, const NpyArray& labels,
                            const std::string& labels_where, const NpyOptions& options) {
  Dataset d;
  fill_features(d, features, features_where, options);
  fill_labels(d, labels, labels_where, features_where, options);
  return d;
}

Dataset read_npy(const std::string& features_path, const std::string& labels_path, const NpyOptions& options) {
  // The labels first: a mismatch there is found without converting every feature.
  const NpyArray labels = parse_npy(read_whole(labels_path), labels_path);
  const NpyArray features = parse_npy(read_whole(features_path), features_path);
  return dataset_from_arrays(features, features_path, labels, labels_path, options);
}

Dataset read_npz(const std::string& path, const NpyOptions& options) {
  const ZipArchive archive(path);
  const std::string features_entry = npz_entry(archive, options.features_key, "features", "the features key");
  const std::string labels_entry = npz_entry(archive, options.labels_key, "labels", "the labels key");
  const std::string features_where = path + ": array '" + options.features_key + "'";
  const std::string labels_where = path + ": array '" + options.labels_key + "'";
  const NpyArray labels = parse_npy(archive.read(labels_entry), labels_where);
  const NpyArray features = parse_npy(archive.read(features_entry), features_where);
  return dataset_from_arrays(features, features_where, labels, labels_where, options);
}

}  // namespace meridian::models::data

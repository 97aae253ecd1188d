#include "models/interchange/safetensors_file.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace meridian::models::interchange {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian data in host order");

void write_safetensors(const std::filesystem::path& path, const ExportedModel& model) {
  // nlohmann's ordered_json keeps the tensors in layer order, which makes the file easy to read.
  nlohmann::ordered_json header;
  header["__metadata__"] = model.metadata;
  std::size_t offset = 0;
  for (const auto& t : model.tensors) {
    const std::size_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t length = text.size();
  char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out.write(length_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : model.tensors)
    out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * 4));
  out.close();
  if (!out) throw error::UserError(path.string() + ": cannot write: " + std::strerror(errno));
}

}  // namespace meridian::models::interchange

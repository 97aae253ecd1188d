// A small CSV table for tests that start real sites on tabular data: two features and a text label,
// 64 rows, loaded in milliseconds.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace meridian::tests {

// Writes DIR/NAME (creating DIR): header "x,y,label", then 64 rows "i % 7, (i * 3) % 5, labels[i % L]"
// for L labels. Returns the file's path.
inline std::filesystem::path write_small_table(const std::filesystem::path& dir, const std::string& name,
                                               const std::vector<std::string>& labels) {
  std::filesystem::create_directories(dir);
  const auto file = dir / name;
  std::ofstream out(file);
  out << "x,y,label\n";
  for (std::size_t i = 0; i < 64; ++i) out << i % 7 << "," << (i * 3) % 5 << "," << labels[i % labels.size()] << "\n";
  return file;
}

}  // namespace meridian::tests

// Reads the PyTorch reference files under tests/models/reference/: after '#' comment lines, each array
// is a header line "name count" followed by one line of `count` numbers.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace meridian::models::testing {

// The arrays of the file at `path`, by name. Fails the test (REQUIRE) when the file cannot be read or an
// array is shorter than its count.
inline std::map<std::string, std::vector<double>> read_reference_arrays(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, std::vector<double>> arrays;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream header(line);
    std::string name;
    std::size_t count = 0;
    header >> name >> count;
    std::vector<double> values(count);
    for (double& v : values) in >> v;
    REQUIRE(in.good());
    arrays[name] = std::move(values);
    std::getline(in, line);  // rest of the values line
  }
  return arrays;
}

}  // namespace meridian::models::testing

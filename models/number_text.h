// The shortest decimal text that reads back as the same float (std::to_chars), for layer descriptions and
// so for model fingerprints: "0.1", "1e-05".
#pragma once

#include <charconv>
#include <string>

namespace meridian::models {

inline std::string number_text(float value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

}  // namespace meridian::models

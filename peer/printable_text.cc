#include "peer/printable_text.h"

namespace meridian::peer {

std::string printable_text(std::string_view text, std::size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + (cut ? 3 : 0));
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  if (cut) out += "...";
  return out;
}

}  // namespace meridian::peer

#include "peer/printable_text.h"

#include <cstdint>

namespace meridian::peer {

namespace {

// The length of the well-formed UTF-8 sequence of a non-ASCII character at the start of `s`, and its
// code point; 0 when the bytes there are not one (a stray continuation, an overlong form, a surrogate,
// beyond U+10FFFF, or cut short).
std::size_t utf8_sequence(std::string_view s, char32_t& cp) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  std::size_t n = 0;
  if (lead >= 0xc2 && lead <= 0xdf) n = 2, cp = lead & 0x1f;
  else if (lead >= 0xe0 && lead <= 0xef) n = 3, cp = lead & 0x0f;
  else if (lead >= 0xf0 && lead <= 0xf4) n = 4, cp = lead & 0x07;
  else return 0;
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

// Characters that are printable but rewrite what a reader sees: C1 controls (some terminals act on
// them), line and paragraph separators (a forged log line), and the bidirectional overrides and
// isolates (text that displays in another order than it reads).
bool deceptive(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable_text(std::string_view text, std::size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + (cut ? 3 : 0));
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (char32_t cp = 0; c >= 0x80) {
      const std::size_t n = utf8_sequence(text.substr(i), cp);
      if (n == 0 || deceptive(cp)) {
        for (std::size_t k = 0; k < (n == 0 ? 1 : n); ++k) escape(static_cast<unsigned char>(text[i + k]));
        i += n == 0 ? 1 : n;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
    } else {
      escape(c);
      ++i;
    }
  }
  if (cut) out += "...";
  return out;
}

}  // namespace meridian::peer

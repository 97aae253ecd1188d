#include "models/data/npy_array.h"

#include <cctype>
#include <limits>
#include <optional>

#include "models/data/dataset.h"

namespace meridian::models::data {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

std::uint64_t little_endian(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

std::string printable(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isprint(u) != 0) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// A reader of the header's dict literal: exactly the subset np.save writes (string keys; string,
// True/False and tuple-of-integers values), so anything else is reported rather than half-understood.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  void parse(NpyArray& out) {
    expect('{');
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    while (peek() != '}') {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() == '[')
          fail("structured dtypes (a list as 'descr') are not supported; save one plain array per field");
        out.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (boolean()) fail("fortran_order is True; save a C-ordered array (np.ascontiguousarray)");
        have_order = true;
      } else if (key == "shape") {
        out.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      skip_space();
      if (peek() == ',') {
        ++at_;
        skip_space();
      } else if (peek() != '}') {
        fail("expected ',' or '}' in the header at offset " + std::to_string(at_));
      }
    }
    if (!have_descr || !have_order || !have_shape) {
      fail(std::string("header lacks ") + (!have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'"));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw DataError(where_ + ": " + what); }

  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_])) != 0) ++at_;
  }
  char peek() const {
    if (at_ >= text_.size()) fail("header ends early: '" + printable(text_) + "'");
    return text_[at_];
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) {
      fail(std::string("expected '") + c + "' at offset " + std::to_string(at_) + " of the header '" +
           printable(text_) + "'");
    }
    ++at_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail("expected a quoted string at offset " + std::to_string(at_) + " of the header");
    const std::size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) fail("unterminated string in the header");
    std::string s(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return value;
      }
    }
    fail("expected True or False at offset " + std::to_string(at_) + " of the header");
  }
  std::vector<std::size_t> tuple() {
    expect('(');
    std::vector<std::size_t> dims;
    skip_space();
    while (peek() != ')') {
      std::size_t v = 0;
      const std::size_t start = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])) != 0) {
        const std::size_t digit = static_cast<std::size_t>(text_[at_] - '0');
        if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10) fail("a dimension of 'shape' overflows");
        v = v * 10 + digit;
        ++at_;
      }
      if (at_ == start) fail("'shape' must be a tuple of non-negative integers");
      dims.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++at_;
        skip_space();
      } else if (peek() != ')') {
        fail("'shape' must be a tuple of non-negative integers");
      }
    }
    ++at_;
    return dims;
  }

  std::string_view text_;
  const std::string& where_;
  std::size_t at_ = 0;
};

// Splits a descr such as '<f4', '|u1', '>i8', '<U12' into kind, size and byte order.
void parse_descr(NpyArray& a, const std::string& where) {
  const std::string& d = a.descr;
  auto bad = [&](const std::string& why) { throw DataError(where + ": dtype '" + d + "' " + why); };
  if (d.size() >= 2 && d[1] == 'O')
    bad("holds Python objects (pickles), which are not read; save numbers or fixed-width strings");
  if (d.size() < 3 || (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=')) bad("is not a NumPy type string");
  a.kind = d[1];
  if (std::string_view("fiubUS").find(a.kind) == std::string_view::npos) bad("is not a number or text type");
  std::size_t n = 0;
  for (std::size_t i = 2; i < d.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(d[i])) == 0 || n > 1'000'000) bad("is not a NumPy type string");
    n = n * 10 + static_cast<std::size_t>(d[i] - '0');
  }
  // 'U' counts characters of 4 bytes (UTF-32); every other kind counts bytes.
  a.item_size = a.kind == 'U' ? n * 4 : n;
  if (a.item_size == 0) bad("has no width");
  // '=' is the writer's native order; every machine Meridian runs on is little-endian.
  a.big_endian = d[0] == '>';
}

}  // namespace

std::size_t NpyArray::count() const {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;
  return n;
}

std::string NpyArray::shape_text() const {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

NpyArray parse_npy(std::string buffer, const std::string& where) {
  const std::string_view bytes = buffer;
  if (!bytes.starts_with(kMagic)) {
    throw DataError(where + ": not a NumPy .npy array: starts with '" + printable(bytes.substr(0, kMagic.size())) +
                    "', expected '\\x93NUMPY'");
  }
  if (bytes.size() < kMagic.size() + 2) throw DataError(where + ": truncated: the file ends inside the .npy header");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3) {
    throw DataError(where + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not known (expected 1.0, 2.0 or 3.0)");
  }
  // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4 (3 only changes the text
  // encoding to UTF-8, which the keys and values NumPy writes do not need).
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + length_bytes;
  if (bytes.size() < prefix) throw DataError(where + ": truncated: the file ends inside the .npy header");
  const std::uint64_t header_length = little_endian(bytes.substr(8, length_bytes));
  if (bytes.size() - prefix < header_length) {
    throw DataError(where + ": truncated: the .npy header announces " + std::to_string(header_length) +
                    " bytes but only " + std::to_string(bytes.size() - prefix) + " follow");
  }
  NpyArray a;
  HeaderParser(bytes.substr(prefix, header_length), where).parse(a);
  parse_descr(a, where);
  std::size_t elements = 1;
  for (const std::size_t d : a.shape) {
    if (d != 0 && elements > std::numeric_limits<std::size_t>::max() / d) {
      throw DataError(where + ": shape " + a.shape_text() + " is too large");
    }
    elements *= d;
  }
  const std::size_t available = bytes.size() - prefix - header_length;
  if (elements > std::numeric_limits<std::size_t>::max() / a.item_size || elements * a.item_size != available) {
    const bool overflow = elements > std::numeric_limits<std::size_t>::max() / a.item_size;
    throw DataError(where + ": " + (overflow || elements * a.item_size > available ? "truncated: " : "") + "shape " +
                    a.shape_text() + " of '" + a.descr + "' needs " +
                    (overflow ? std::string("more than 2^64") : std::to_string(elements * a.item_size)) +
                    " bytes of data, the file holds " + std::to_string(available));
  }
  // Dropping the header in place moves the elements to the front of the caller's buffer instead of
  // copying them into a new one.
  buffer.erase(0, prefix + header_length);
  a.data = std::move(buffer);
  return a;
}

}  // namespace meridian::models::data

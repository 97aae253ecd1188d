// Protocol Buffers wire encoding for writing a message by hand, field by field: varints, 32-bit floats,
// length-delimited bytes and nested messages (developers.google.com/protocol-buffers/docs/encoding).
// It lets the ONNX writer (onnx_file.h) produce ONNX's messages without compiling ONNX's schema into the
// project. Fields are written in the order called; repeated fields are written one element at a time
// (unpacked), which every protobuf parser accepts.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace meridian::models::interchange {

class ProtobufWriter {
 public:
  // Wire type 0: int32, int64, enum and bool fields. A negative int64 takes ten bytes, as protobuf's.
  ProtobufWriter& varint(std::uint32_t field, std::int64_t value) {
    key(field, 0);
    raw_varint(static_cast<std::uint64_t>(value));
    return *this;
  }
  // Wire type 5: a float field.
  ProtobufWriter& f32(std::uint32_t field, float value) {
    key(field, 5);
    const auto bits = std::bit_cast<std::uint32_t>(value);
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    return *this;
  }
  // Wire type 2: string and bytes fields.
  ProtobufWriter& bytes(std::uint32_t field, std::string_view value) {
    key(field, 2);
    raw_varint(value.size());
    bytes_.append(value);
    return *this;
  }
  // Wire type 2: an embedded message.
  ProtobufWriter& message(std::uint32_t field, const ProtobufWriter& value) { return bytes(field, value.bytes_); }

  const std::string& data() const { return bytes_; }

 private:
  void key(std::uint32_t field, std::uint32_t wire_type) { raw_varint((std::uint64_t{field} << 3) | wire_type); }
  void raw_varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
  }

  std::string bytes_;
};

}  // namespace meridian::models::interchange

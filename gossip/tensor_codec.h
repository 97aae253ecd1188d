// Lossy tensor compression for mixer messages (docs/design.md): fp16, int8 with a scale per block, or
// top-k (the k entries of largest magnitude with their indices). A codec turns a dense float tensor into a packed float
// payload that travels in peer::Message::payload, and tells the sender exactly what the receiver will decode, so that
// the sender can keep the difference (error feedback, gossip/error_feedback.h, or push-sum's kept share) and nothing is
// lost.
//
// Packed layouts (the message's `phase` carries the Encoding, its `total` the dense length n):
//   fp16: ⌈n/2⌉ words; word i holds half(x[2i]) in its high 16 bits and half(x[2i+1]) in its low 16
//         bits (0 when n is odd). Only finite halves are produced, so a word's float exponent field is
//         never all ones: the packed payload passes the transport's finite-value check.
//   topk: 2k words: k values, then k indices as floats (exact: n < 2^24 is required), indices ascending.
//   int8: blocks of kInt8Block elements (the last one shorter), each one scale word s followed by ⌈len/4⌉
//         words of four bytes, element 4i of the block in the high byte of word i. A byte is a
//         sign-magnitude q (bit 7 the sign, |q| <= 126 in the low bits), the element is q·s, and s is 0
//         (an all-zero block) or a power of two. No byte is 0x7f or 0xff, so a word's float exponent
//         field is never all ones: the packed payload passes the transport's finite-value check.
//
// fp16 rounds to nearest even; magnitudes above 65504 saturate to ±65504 and below 2^-24 flush to
// ±0 (the sender's error feedback keeps what was cut). Round trip: |half(x) − x| ≤ 2^-11·|x| for
// 2^-14 ≤ |x| ≤ 65504, ≤ 2^-25 below.
//
// int8 takes for s the smallest power of two with max|block| ≤ 126·s (so s < max|block|/63) and rounds
// x/s to the nearest integer, ties to even; NaN goes as 0, and magnitudes above 126·2^121 (infinity
// too) saturate there. Round trip: |q·s − x| ≤ s/2 < max|block|/126 for every
// element of the block; x − q·s is exact in float (what error feedback keeps is exactly what was cut);
// and re-encoding decoded values gives them back bit for bit (q·s is exact, and the scale chosen for it
// is s, or s/2 with 2q).
//
// Thread-safety: a TensorCodec is used by one thread (it keeps scratch buffers); decode() is free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace meridian::gossip {

enum class Encoding : std::uint32_t {
  kDense = 0,  // plain float32 (no compression)
  kFp16 = 1,
  kTopK = 2,
  kInt8 = 3,
};

// Elements per int8 block (one scale word each: 8.125 bits per element).
inline constexpr std::size_t kInt8Block = 256;

struct CompressionSpec {
  Encoding encoding = Encoding::kDense;
  double fraction = 0.01;  // top-k: k = max(1, round(fraction · n)), fraction in (0, 0.5]

  bool operator==(const CompressionSpec&) const = default;
};

// "none" | "fp16" | "int8" | "topk" | "topk:FRACTION" (e.g. topk:0.01). Returns nullopt for anything else.
std::optional<CompressionSpec> parse_compression(const std::string& text);
// The text parse_compression reads back ("none", "fp16", "int8", "topk:0.01").
std::string to_string(const CompressionSpec& spec);

// IEEE-754 binary16 conversions, round to nearest even, saturating at ±65504 (never inf; NaN → 0).
std::uint16_t float_to_half(float x);
float half_to_float(std::uint16_t h);

class TensorCodec {
 public:
  explicit TensorCodec(CompressionSpec spec = {}) : spec_(spec) {}

  const CompressionSpec& spec() const { return spec_; }

  // Packs `values` into `packed` (resized; reuse it across calls) and writes into `decoded` (same size
  // as `values`) exactly what decode() will produce from `packed`. Throws error::InternalError when
  // decoded.size() != values.size(), error::UserError for top-k when values.size() >= 2^24.
  void encode(std::span<const float> values, std::vector<float>& packed, std::span<float> decoded);

 private:
  CompressionSpec spec_;
  std::vector<std::uint32_t> order_;  // top-k selection scratch
};

// Unpacks `packed` (of `encoding`) into `out`, whose size is the dense length n. Returns false when
// `packed` cannot be a well-formed payload for n (wrong length, index out of range or not ascending,
// non-finite value); `out` is then unspecified.
[[nodiscard]] bool decode(Encoding encoding, std::span<const float> packed, std::span<float> out);

// Packed payload length for n elements.
std::size_t packed_size(const CompressionSpec& spec, std::size_t n);

}  // namespace meridian::gossip

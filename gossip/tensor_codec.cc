#include "gossip/tensor_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "error/error.h"

namespace meridian::gossip {

std::optional<CompressionSpec> parse_compression(const std::string& text) {
  if (text == "none" || text.empty()) return CompressionSpec{};
  if (text == "fp16") return CompressionSpec{Encoding::kFp16, CompressionSpec{}.fraction};
  if (text == "int8") return CompressionSpec{Encoding::kInt8, CompressionSpec{}.fraction};
  if (text == "topk") return CompressionSpec{Encoding::kTopK, CompressionSpec{}.fraction};
  if (text.rfind("topk:", 0) == 0) {
    const std::string number = text.substr(5);
    char* end = nullptr;
    const double f = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(f > 0.0 && f <= 0.5)) return std::nullopt;
    return CompressionSpec{Encoding::kTopK, f};
  }
  return std::nullopt;
}

std::string to_string(const CompressionSpec& spec) {
  switch (spec.encoding) {
    case Encoding::kDense: return "none";
    case Encoding::kFp16: return "fp16";
    case Encoding::kInt8: return "int8";
    case Encoding::kTopK: {
      std::string f = std::to_string(spec.fraction);
      // std::to_string prints six decimals; trailing zeros only make the label longer.
      while (f.size() > 1 && f.back() == '0') f.pop_back();
      return "topk:" + f;
    }
  }
  return "none";
}

std::uint16_t float_to_half(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const std::uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0;                // NaN: nothing sensible to send
  if (abs >= 0x477ff000u) return sign | 0x7bffu;  // >= 65520 would round to infinity: saturate
  if (abs < 0x38800000u) {
    // Below 2^-14 the half is subnormal, m·2^-24: scaling by 2^24 is exact, and nearbyint rounds
    // to nearest even in the default rounding mode. 1024 lands on the smallest normal, 0x0400.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  const std::uint32_t exponent = (abs >> 23) - 127 + 15;  // 1..30 here
  const std::uint32_t mantissa = abs & 0x7fffffu;
  std::uint32_t h = (exponent << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa moves into the exponent, which is the right rounding.
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<std::uint16_t>(h);
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

std::size_t packed_size(const CompressionSpec& spec, std::size_t n) {
  switch (spec.encoding) {
    case Encoding::kDense: return n;
    case Encoding::kFp16: return (n + 1) / 2;
    case Encoding::kTopK: {
      if (n == 0) return 0;
      const auto k = static_cast<std::size_t>(std::llround(spec.fraction * static_cast<double>(n)));
      return 2 * std::clamp<std::size_t>(k, 1, n);
    }
    case Encoding::kInt8: {
      const std::size_t rest = n % kInt8Block;
      return n / kInt8Block * (1 + kInt8Block / 4) + (rest ? 1 + (rest + 3) / 4 : 0);
    }
  }
  return n;
}

namespace {

// The largest int8 magnitude, 126·2^121: a larger scale would make 126·s overflow to infinity.
constexpr float kInt8Max = 126.0f * 0x1p121f;

// The int8 scale of a block whose largest magnitude is `max` <= kInt8Max (see the header): the smallest
// power of two s with max <= 126·s, or 0 for an all-zero block. ilogb puts max in [2^E, 2^(E+1)), so
// max / 2^(E−6) is in [64, 128): the answer is 2^(E−6) or 2^(E−5). 2^-149, the smallest float, is the
// floor: below it every element is a multiple of it anyway.
float int8_scale(float max) {
  if (max == 0.0f) return 0.0f;
  int e = std::max(std::ilogb(max) - 6, -149);
  if (max > 126.0f * std::ldexp(1.0f, e)) ++e;
  return std::ldexp(1.0f, e);
}

// A byte: sign-magnitude q, |q| <= 126.
std::uint32_t int8_byte(int q) {
  return q < 0 ? 0x80u | static_cast<std::uint32_t>(-q) : static_cast<std::uint32_t>(q);
}

// The element a byte stands for, or NaN for a byte no encoder writes (|q| = 127).
float int8_value(std::uint32_t byte, float scale) {
  const std::uint32_t magnitude = byte & 0x7fu;
  if (magnitude > 126u) return std::numeric_limits<float>::quiet_NaN();
  const float v = static_cast<float>(magnitude) * scale;
  return byte & 0x80u ? -v : v;
}

void encode_int8(std::span<const float> values, std::vector<float>& packed, std::span<float> decoded) {
  const std::size_t n = values.size();
  std::size_t word = 0;
  for (std::size_t begin = 0; begin < n; begin += kInt8Block) {
    const std::size_t end = std::min(n, begin + kInt8Block);
    // NaN is skipped here and sent as 0; larger magnitudes (infinity too) saturate at kInt8Max.
    float max = 0.0f;
    for (std::size_t i = begin; i < end; ++i)
      if (std::fabs(values[i]) > max) max = std::fabs(values[i]);
    const float scale = int8_scale(std::min(max, kInt8Max));
    packed[word++] = scale;
    for (std::size_t i = begin; i < end; i += 4) {
      std::uint32_t bits = 0;
      for (std::size_t j = 0; j < 4; ++j) {
        int q = 0;
        // x / s is exact (s is a power of two); nearbyint rounds half to even.
        if (i + j < end && scale != 0.0f && !std::isnan(values[i + j]))
          q = static_cast<int>(std::clamp(std::nearbyint(values[i + j] / scale), -126.0f, 126.0f));
        if (i + j < end) decoded[i + j] = static_cast<float>(q) * scale;
        bits |= int8_byte(q) << (24 - 8 * j);
      }
      packed[word++] = std::bit_cast<float>(bits);
    }
  }
}

bool decode_int8(std::span<const float> packed, std::span<float> out) {
  const std::size_t n = out.size();
  if (packed.size() != packed_size(CompressionSpec{Encoding::kInt8, 0.0}, n)) return false;
  std::size_t word = 0;
  for (std::size_t begin = 0; begin < n; begin += kInt8Block) {
    const std::size_t end = std::min(n, begin + kInt8Block);
    const float scale = packed[word++];
    // 0, or a power of two no larger than an encoder writes (2^121: 126·s stays finite).
    int exponent = 0;
    if (!(scale == 0.0f ||
          (std::isfinite(scale) && scale > 0.0f && std::frexp(scale, &exponent) == 0.5f && exponent <= 122)))
      return false;
    for (std::size_t i = begin; i < end; i += 4) {
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(packed[word++]);
      for (std::size_t j = 0; j < 4 && i + j < end; ++j) {
        const float v = int8_value((bits >> (24 - 8 * j)) & 0xffu, scale);
        if (std::isnan(v)) return false;
        out[i + j] = v;
      }
    }
  }
  return true;
}

}  // namespace

void TensorCodec::encode(std::span<const float> values, std::vector<float>& packed, std::span<float> decoded) {
  const std::size_t n = values.size();
  if (decoded.size() != n)
    throw error::InternalError("tensor codec: decoded has " + std::to_string(decoded.size()) + " elements, values " +
                               std::to_string(n));
  packed.resize(packed_size(spec_, n));
  switch (spec_.encoding) {
    case Encoding::kDense:
      std::copy(values.begin(), values.end(), packed.begin());
      std::copy(values.begin(), values.end(), decoded.begin());
      return;
    case Encoding::kFp16:
      for (std::size_t i = 0; i < n; i += 2) {
        const std::uint16_t hi = float_to_half(values[i]);
        const std::uint16_t lo = i + 1 < n ? float_to_half(values[i + 1]) : std::uint16_t{0};
        packed[i / 2] = std::bit_cast<float>((static_cast<std::uint32_t>(hi) << 16) | lo);
        decoded[i] = half_to_float(hi);
        if (i + 1 < n) decoded[i + 1] = half_to_float(lo);
      }
      return;
    case Encoding::kTopK: {
      if (n >= (std::size_t{1} << 24))
        throw error::UserError("tensor codec: top-k needs fewer than 2^24 elements, got " + std::to_string(n));
      const std::size_t k = packed.size() / 2;
      order_.resize(n);
      std::iota(order_.begin(), order_.end(), 0u);
      // Largest magnitudes first; ties broken by index so the choice is deterministic.
      auto larger = [&](std::uint32_t a, std::uint32_t b) {
        const float fa = std::fabs(values[a]), fb = std::fabs(values[b]);
        return fa > fb || (fa == fb && a < b);
      };
      if (k < n)
        std::nth_element(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(), larger);
      std::sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k));
      std::fill(decoded.begin(), decoded.end(), 0.0f);
      for (std::size_t j = 0; j < k; ++j) {
        const std::uint32_t i = order_[j];
        packed[j] = values[i];
        packed[k + j] = static_cast<float>(i);
        decoded[i] = values[i];
      }
      return;
    }
    case Encoding::kInt8: encode_int8(values, packed, decoded); return;
  }
}

bool decode(Encoding encoding, std::span<const float> packed, std::span<float> out) {
  const std::size_t n = out.size();
  switch (encoding) {
    case Encoding::kDense:
      if (packed.size() != n) return false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(packed[i])) return false;
        out[i] = packed[i];
      }
      return true;
    case Encoding::kFp16:
      if (packed.size() != (n + 1) / 2) return false;
      for (std::size_t i = 0; i < n; i += 2) {
        const std::uint32_t word = std::bit_cast<std::uint32_t>(packed[i / 2]);
        const float hi = half_to_float(static_cast<std::uint16_t>(word >> 16));
        if (!std::isfinite(hi)) return false;
        out[i] = hi;
        if (i + 1 < n) {
          const float lo = half_to_float(static_cast<std::uint16_t>(word & 0xffffu));
          if (!std::isfinite(lo)) return false;
          out[i + 1] = lo;
        }
      }
      return true;
    case Encoding::kTopK: {
      if (packed.size() % 2 != 0 || packed.size() / 2 > n) return false;
      const std::size_t k = packed.size() / 2;
      std::fill(out.begin(), out.end(), 0.0f);
      double previous = -1.0;
      for (std::size_t j = 0; j < k; ++j) {
        const float value = packed[j];
        const double index = packed[k + j];
        if (!std::isfinite(value) || !(index > previous) || index >= static_cast<double>(n) ||
            index != std::floor(index))
          return false;
        out[static_cast<std::size_t>(index)] = value;
        previous = index;
      }
      return true;
    }
    case Encoding::kInt8: return decode_int8(packed, out);
  }
  return false;
}

}  // namespace meridian::gossip

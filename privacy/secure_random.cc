#include "privacy/secure_random.h"

#include <sodium.h>

#include <cmath>
#include <cstring>

#include "error/error.h"

namespace meridian::privacy {
namespace {

void start_sodium() {
  if (sodium_init() < 0) throw error::InternalError("libsodium could not be initialized");
}

}  // namespace

SecureRandom::SecureRandom() {
  start_sodium();
  randombytes_buf(key_.data(), key_.size());
  refill();
}

SecureRandom::SecureRandom(std::span<const std::uint8_t, kKeyBytes> key) {
  start_sodium();
  std::memcpy(key_.data(), key.data(), key_.size());
  refill();
}

SecureRandom::~SecureRandom() {
  sodium_memzero(key_.data(), key_.size());
  sodium_memzero(words_.data(), sizeof(words_));
}

void SecureRandom::refill() {
  std::array<std::uint8_t, crypto_stream_chacha20_NONCEBYTES> nonce{};
  std::uint64_t n = nonce_++;
  for (std::size_t i = 0; i < nonce.size() && i < sizeof(n); ++i) nonce[i] = static_cast<std::uint8_t>(n >> (8 * i));
  crypto_stream_chacha20(reinterpret_cast<unsigned char*>(words_.data()), sizeof(words_), nonce.data(), key_.data());
  at_ = 0;
}

std::uint64_t SecureRandom::next() {
  if (at_ == words_.size()) refill();
  return words_[at_++];
}

double SecureRandom::uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }

double SecureRandom::gaussian() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u = 0.0, v = 0.0, s = 0.0;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double scale = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * scale;
  has_spare_ = true;
  return u * scale;
}

}  // namespace meridian::privacy

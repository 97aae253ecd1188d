// Random numbers that nobody can predict or replay, for DP-SGD's noise and its Poisson sampling: the
// ChaCha20 keystream (libsodium's crypto_stream_chacha20) under a 256-bit key drawn from the operating
// system's generator (randombytes_buf).
//
// Why not the seeded SplitMix64 that every other draw in Meridian uses: DP-SGD's guarantee holds only if
// whoever sees a step's result cannot know the noise added to it nor which examples it used. A seed that
// sits in the configuration or a checkpoint, or that can be guessed, would let them replay the draws,
// subtract the noise and lose the guarantee; and a generator with 64 bits of state can be rebuilt from a
// few of its outputs. The price is that a DP run is not reproducible, by design.
//
// Not thread-safe: one owner (the trainer thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace meridian::privacy {

class SecureRandom {
 public:
  static constexpr std::size_t kKeyBytes = 32;

  // A key from the operating system's generator. Throws error::InternalError when libsodium cannot start.
  SecureRandom();
  // A given key: the same key gives the same draws (for tests only; a run must never reuse a key).
  explicit SecureRandom(std::span<const std::uint8_t, kKeyBytes> key);
  SecureRandom(const SecureRandom&) = delete;
  SecureRandom& operator=(const SecureRandom&) = delete;
  // Wipes the key and the unused keystream.
  ~SecureRandom();

  // 64 uniform bits.
  std::uint64_t next();
  // Uniform in the open interval (0, 1), with 53 bits.
  double uniform();
  // Standard normal, by the Marsaglia polar method in double precision.
  double gaussian();

 private:
  void refill();

  std::array<std::uint8_t, kKeyBytes> key_{};
  std::uint64_t nonce_ = 0;                // one keystream block run per refill, never repeated under a key
  std::array<std::uint64_t, 512> words_{};  // keystream not yet used, from at_
  std::size_t at_ = 0;
  bool has_spare_ = false;  // the polar method draws normals in pairs
  double spare_ = 0.0;
};

}  // namespace meridian::privacy

#include "privacy/pair_keys.h"

#include <algorithm>
#include <string_view>

#include <sodium.h>
#include <zmq.h>

namespace meridian::privacy {

namespace {

// Separates these secrets from every other use of the same X25519 keys (CurveZMQ's own handshake).
constexpr std::string_view kContext = "meridian secure aggregation pair key v1";

std::array<unsigned char, 32> decode_key(const std::string& z85, const char* which) {
  std::array<unsigned char, 32> raw{};
  if (z85.size() != 40 || zmq_z85_decode(raw.data(), z85.c_str()) == nullptr)
    throw PairKeyError(std::string(which) + " key is not a 40-character Z85 key");
  return raw;
}

void init_sodium() {
  // sodium_init is idempotent and thread-safe; it picks the fastest implementations for this CPU.
  if (sodium_init() < 0) throw error::InternalError("libsodium failed to initialize");
}

}  // namespace

PairKey derive_pair_key(const peer::CurveKeyPair& own, const std::string& peer_public) {
  init_sodium();
  auto secret = decode_key(own.secret_key, "this site's secret");
  const auto mine = decode_key(own.public_key, "this site's public");
  const auto theirs = decode_key(peer_public, "the peer's public");
  std::array<unsigned char, crypto_scalarmult_BYTES> shared{};
  const int refused = crypto_scalarmult(shared.data(), secret.data(), theirs.data());
  sodium_memzero(secret.data(), secret.size());
  if (refused != 0) {
    sodium_memzero(shared.data(), shared.size());
    throw PairKeyError("the peer's public key is a low-order point: no pair secret can be made with it");
  }
  // Both public keys in ascending byte order, so that both sites of the pair hash the same bytes.
  const bool mine_first = std::lexicographical_compare(mine.begin(), mine.end(), theirs.begin(), theirs.end());
  const auto& first = mine_first ? mine : theirs;
  const auto& second = mine_first ? theirs : mine;
  PairKey key{};
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, key.size());
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(kContext.data()), kContext.size());
  crypto_generichash_update(&state, shared.data(), shared.size());
  crypto_generichash_update(&state, first.data(), first.size());
  crypto_generichash_update(&state, second.data(), second.size());
  crypto_generichash_final(&state, key.data(), key.size());
  sodium_memzero(shared.data(), shared.size());
  sodium_memzero(&state, sizeof state);
  return key;
}

PairKeys::PairKeys(peer::CurveKeyPair own, PublicKeyOf public_key_of)
    : own_(std::move(own)), public_key_of_(std::move(public_key_of)) {
  init_sodium();
}

PairKeys::~PairKeys() {
  for (auto& [public_key, key] : by_public_key_) sodium_memzero(key.data(), key.size());
  sodium_memzero(own_.secret_key.data(), own_.secret_key.size());
}

const PairKey& PairKeys::with(const std::string& name) {
  const auto public_key = public_key_of_(name);
  if (!public_key) throw PairKeyError("secure aggregation: the roster lists no key for site '" + name + "'");
  // Keyed by the public key, not the name: a roster change that replaces a site's key must not reuse
  // the secret made with the old one.
  auto it = by_public_key_.find(*public_key);
  if (it == by_public_key_.end()) it = by_public_key_.emplace(*public_key, derive_pair_key(own_, *public_key)).first;
  return it->second;
}

}  // namespace meridian::privacy

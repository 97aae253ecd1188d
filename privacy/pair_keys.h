// The secret each pair of sites shares for secure aggregation, from the CurveZMQ keys they already
// have: X25519 of this site's secret key and the peer's public key (libsodium's crypto_scalarmult),
// then BLAKE2b-256 (crypto_generichash) of a context string, that point and both public keys in a fixed
// order, so that the two sites of a pair derive the same 32 bytes and no other pair, and no other use
// of the CurveZMQ keys, ever does.
//
// Keys and pair secrets never leave the site: nothing here is sent, logged or written; the secrets are
// wiped when the PairKeys is destroyed.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "error/error.h"
#include "peer/curve_keys.h"

namespace meridian::privacy {

using PairKey = std::array<unsigned char, 32>;

// A key that cannot make a pair secret: not Z85, or a low-order point whose X25519 product is zero.
class PairKeyError : public error::PeerError {
 public:
  using error::PeerError::PeerError;
};

// The pair secret of the site holding `own` with the site whose public key is `peer_public` (both
// Z85). Symmetric: derive(a, b.public) == derive(b, a.public). Throws PairKeyError for a key that is
// not 40 Z85 characters or a point X25519 refuses.
PairKey derive_pair_key(const peer::CurveKeyPair& own, const std::string& peer_public);

// This site's pair secrets with the other sites, derived on first use and kept.
// Thread-safety: none (the communication thread owns it).
class PairKeys {
 public:
  // The public key (Z85) the roster lists for a site name; nullopt for a name it does not list.
  using PublicKeyOf = std::function<std::optional<std::string>(const std::string& name)>;

  PairKeys(peer::CurveKeyPair own, PublicKeyOf public_key_of);
  ~PairKeys();
  PairKeys(const PairKeys&) = delete;
  PairKeys& operator=(const PairKeys&) = delete;

  // The secret shared with site `name`. A roster change that gives `name` another key gives another
  // secret. Throws PairKeyError when the roster does not list `name` or its key is unusable.
  const PairKey& with(const std::string& name);

 private:
  peer::CurveKeyPair own_;
  PublicKeyOf public_key_of_;
  std::map<std::string, PairKey> by_public_key_;
};

}  // namespace meridian::privacy

// A site's CurveZMQ identity: a key pair stored as two small text files in one directory.
//   DIR/public.key  the Z85 public key (40 characters), readable by anyone; goes into the roster
//   DIR/secret.key  the Z85 secret key, file mode 0600; never leaves the site
// Lines starting with '#' are comments.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace meridian::peer {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// True when `key` is a 40-character Z85 string that decodes to 32 bytes.
bool is_z85_key(std::string_view key);

// A fresh key pair from libzmq (libsodium). Throws error::InternalError when libzmq lacks CURVE support.
CurveKeyPair generate_curve_key_pair();

// Writes DIR/public.key (0644) and DIR/secret.key (0600), creating DIR if needed. Refuses to overwrite
// an existing secret key unless `overwrite`. Throws error::UserError naming the file on failure.
void write_key_pair(const CurveKeyPair& keys, const std::filesystem::path& dir, bool overwrite = false);

// Reads DIR/secret.key and derives the public key from it. Throws error::UserError naming the file
// when it is missing, malformed, or readable by group or others.
CurveKeyPair read_key_pair(const std::filesystem::path& dir);

}  // namespace meridian::peer

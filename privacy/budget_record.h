// DP-SGD's spent budget as a checkpoint carries it, sealed so that an altered record is refused.
//
// Why a seal of its own: a checkpoint's CRC-32 (daemon/checkpoint/checkpoint.h) catches damage, not edits, since
// whoever edits the file can recompute it. A record that said fewer steps were taken would let a site
// spend its budget again on the same patients. So the record carries a keyed BLAKE2b tag (libsodium's
// crypto_generichash) over its fields, the checkpoint's round and the model's fingerprint, under a key
// derived from the site's CurveZMQ secret key: nobody without that key can make a record that opens,
// and a record moved into another checkpoint (another round, another model) does not open either. A
// site run without a secret key (--insecure, or a transport of the caller's) derives the key from its
// name instead: the tag then still catches an edit made without recomputing it, but no longer a
// deliberate one; the log says so. Rolling a whole run directory back to an older checkpoint is
// outside what a record can see.
//
// Format (little-endian): "MRDNDPB1", f64 sample rate, f64 noise multiplier, f64 delta, f64 clip, f64
// epsilon budget (0: none), u64 steps, then the 32-byte tag.
//
// Thread-safety: const member functions may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "error/error.h"

namespace meridian::privacy {

struct BudgetRecord {
  double sample_rate = 0.0;
  double noise_multiplier = 0.0;
  double delta = 0.0;
  double clip = 0.0;
  std::optional<double> epsilon_budget;
  std::uint64_t steps = 0;  // steps accounted
  bool operator==(const BudgetRecord&) const = default;
};

// A record that does not open: altered, truncated, or sealed under another key, round or model.
class BudgetRecordError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class BudgetSeal {
 public:
  // The key is derived from `secret` (the site's CurveZMQ secret key, or its name without one). Throws
  // error::InternalError when libsodium cannot start.
  explicit BudgetSeal(std::string_view secret);
  ~BudgetSeal();
  BudgetSeal(const BudgetSeal&) = delete;
  BudgetSeal& operator=(const BudgetSeal&) = delete;

  // The sealed record for a checkpoint of round `round` of the model with fingerprint `fingerprint`.
  std::vector<std::uint8_t> seal(const BudgetRecord& record, std::uint64_t round, std::string_view fingerprint) const;
  // The record, when its tag matches; throws BudgetRecordError otherwise.
  BudgetRecord open(std::span<const std::uint8_t> sealed, std::uint64_t round, std::string_view fingerprint) const;

 private:
  std::array<std::uint8_t, 32> tag(std::span<const std::uint8_t> fields, std::uint64_t round,
                                   std::string_view fingerprint) const;

  std::array<std::uint8_t, 32> key_{};
};

}  // namespace meridian::privacy

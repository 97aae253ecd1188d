// What secure aggregation counts on one site (privacy/secure_mean_mixer.h), exported on /metrics as
// meridian_secure_aggregation_total{event} with the events named by kSecureAggregationEvents.
//
// Thread-safety: the mixers on the communication thread add; any thread reads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace meridian::privacy {

struct SecureAggregationCounters {
  std::atomic<std::uint64_t> clipped{0};            // values clipped to the fixed-point range before encoding
  std::atomic<std::uint64_t> non_finite{0};         // NaN or infinity in this site's values, sent as 0
  std::atomic<std::uint64_t> refused_malformed{0};  // a share of the wrong length, slice or padding
  std::atomic<std::uint64_t> refused_stale{0};      // a share of a round this site finished or abandoned
  std::atomic<std::uint64_t> refused_unmasked{0};   // a float share: a secure site takes none
  std::atomic<std::uint64_t> shares_sent{0};        // masked shares sent (one message each)
  std::atomic<std::uint64_t> rounds_abandoned{0};

  // The counters in the order of kSecureAggregationEvents.
  std::array<std::uint64_t, 7> snapshot() const {
    return {clipped.load(),          non_finite.load(),       refused_malformed.load(), refused_stale.load(),
            refused_unmasked.load(), shares_sent.load(),      rounds_abandoned.load()};
  }
};

inline constexpr std::array<std::string_view, 7> kSecureAggregationEvents = {
    "clipped", "non_finite", "refused_malformed", "refused_stale", "refused_unmasked", "shares_sent",
    "rounds_abandoned"};

}  // namespace meridian::privacy

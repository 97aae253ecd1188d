#include "privacy/budget_record.h"

#include <sodium.h>

#include <cstring>

namespace meridian::privacy {
namespace {

constexpr std::array<char, 8> kMagic = {'M', 'R', 'D', 'N', 'D', 'P', 'B', '1'};
constexpr std::size_t kFieldBytes = kMagic.size() + 5 * 8 + 8;
constexpr std::size_t kTagBytes = 32;
// Domain separation: the key derived for this purpose differs from any other use of the secret.
constexpr std::string_view kContext = "meridian checkpoint privacy budget, version 1";

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_f64(std::vector<std::uint8_t>& out, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_u64(out, bits);
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
double get_f64(const std::uint8_t* p) {
  const std::uint64_t bits = get_u64(p);
  double v = 0.0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace

BudgetSeal::BudgetSeal(std::string_view secret) {
  if (sodium_init() < 0) throw error::InternalError("libsodium could not be initialized");
  crypto_generichash(key_.data(), key_.size(), reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                     reinterpret_cast<const unsigned char*>(kContext.data()), kContext.size());
}

BudgetSeal::~BudgetSeal() { sodium_memzero(key_.data(), key_.size()); }

std::array<std::uint8_t, 32> BudgetSeal::tag(std::span<const std::uint8_t> fields, std::uint64_t round,
                                             std::string_view fingerprint) const {
  crypto_generichash_state state;
  crypto_generichash_init(&state, key_.data(), key_.size(), kTagBytes);
  crypto_generichash_update(&state, fields.data(), fields.size());
  std::vector<std::uint8_t> context;
  put_u64(context, round);
  put_u64(context, fingerprint.size());
  crypto_generichash_update(&state, context.data(), context.size());
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(fingerprint.data()), fingerprint.size());
  std::array<std::uint8_t, 32> out{};
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
}

std::vector<std::uint8_t> BudgetSeal::seal(const BudgetRecord& r, std::uint64_t round,
                                           std::string_view fingerprint) const {
  std::vector<std::uint8_t> out(kMagic.begin(), kMagic.end());
  put_f64(out, r.sample_rate);
  put_f64(out, r.noise_multiplier);
  put_f64(out, r.delta);
  put_f64(out, r.clip);
  put_f64(out, r.epsilon_budget.value_or(0.0));
  put_u64(out, r.steps);
  const auto t = tag(out, round, fingerprint);
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

BudgetRecord BudgetSeal::open(std::span<const std::uint8_t> sealed, std::uint64_t round,
                              std::string_view fingerprint) const {
  if (sealed.size() != kFieldBytes + kTagBytes || std::memcmp(sealed.data(), kMagic.data(), kMagic.size()) != 0)
    throw BudgetRecordError("the privacy budget record is malformed");
  const auto expected = tag(sealed.first(kFieldBytes), round, fingerprint);
  // Constant time, as for any tag compared with one an attacker may have shaped.
  if (sodium_memcmp(expected.data(), sealed.data() + kFieldBytes, kTagBytes) != 0)
    throw BudgetRecordError(
        "the privacy budget record does not match its seal: it was altered, or written by another site or for "
        "another checkpoint");
  const std::uint8_t* p = sealed.data() + kMagic.size();
  BudgetRecord r;
  r.sample_rate = get_f64(p);
  r.noise_multiplier = get_f64(p + 8);
  r.delta = get_f64(p + 16);
  r.clip = get_f64(p + 24);
  if (const double budget = get_f64(p + 32); budget > 0) r.epsilon_budget = budget;
  r.steps = get_u64(p + 40);
  return r;
}

}  // namespace meridian::privacy

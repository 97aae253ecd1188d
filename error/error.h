// Meridian's one error hierarchy. Every exception Meridian throws on purpose derives from error::Error
// and carries one of three tiers, which tell the caller what to do with it (docs/design.md, "Errors"):
//
//   user      the operator's input is wrong (flags, config, files, keys, data, a checkpoint chosen by
//             hand). Print the message and exit; retrying the same input cannot help.
//   peer      another site, a local client of the control socket, or the network misbehaved (a round
//             past its deadline, a closed connection, a malformed request). Drop or refuse that party,
//             count it, and go on; the federation carries on without it.
//   internal  an invariant of Meridian's own code broke, or the platform under it failed (a CUDA call).
//             Stop loudly; the message names the file and line. It is a bug to report.
//
// Expected outcomes are not errors: a receive that times out returns std::nullopt, a refused message is
// a counted peer::Rejection, and configuration checks collect every problem as a value before one
// UserError lists them all.
//
// The tier classes derive from std::runtime_error, so code that catches std::exception or
// std::runtime_error keeps catching everything. Header only: every library may include it.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace meridian::error {

enum class Tier { kUser, kPeer, kInternal };

// "user", "peer" or "internal".
constexpr std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::kUser: return "user";
    case Tier::kPeer: return "peer";
    case Tier::kInternal: return "internal";
  }
  return "internal";
}

class Error : public std::runtime_error {
 public:
  Tier tier() const noexcept { return tier_; }

 protected:
  Error(Tier tier, const std::string& what) : std::runtime_error(what), tier_(tier) {}

 private:
  Tier tier_;
};

class UserError : public Error {
 public:
  explicit UserError(const std::string& what) : Error(Tier::kUser, what) {}
};

class PeerError : public Error {
 public:
  explicit PeerError(const std::string& what) : Error(Tier::kPeer, what) {}
};

class InternalError : public Error {
 public:
  // The message is prefixed with where the error was raised ("gossip/dts.cc:42: ..."; paths are
  // relative to the repository because the build maps the source prefix away).
  explicit InternalError(const std::string& what, std::source_location where = std::source_location::current())
      : Error(Tier::kInternal, std::string(where.file_name()) + ":" + std::to_string(where.line()) + ": " + what) {}

 protected:
  // For subclasses that build their own located message (cuda::Error names the failing call).
  struct Located {};
  InternalError(Located, const std::string& what) : Error(Tier::kInternal, what) {}
};

// Checks an invariant of Meridian's own code: throws InternalError naming the file and line when
// `condition` is false. For input from users or peers, throw UserError or PeerError with a message
// that names what was wrong instead.
inline void enforce(bool condition, std::string_view what,
                    std::source_location where = std::source_location::current()) {
  if (!condition) throw InternalError(std::string(what), where);
}

}  // namespace meridian::error

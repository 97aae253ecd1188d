// The one form a site's address may take wherever it can end up dialed: exactly tcp://HOST:PORT.
//   HOST  a DNS name or an IPv4 address: 1-253 letters, digits, '.', '-' or '_'; or an IPv6 address
//         in brackets ("[2001:db8::1]"), without a zone
//   PORT  decimal, 1-65535
// Nothing else: no other transport (ipc://, inproc://, ...), no libzmq interface or source-address
// form ("tcp://eth0;host:port"), no wildcard or unspecified host (*, 0.0.0.0, [::]), no whitespace or
// control character. Every address a peer announces is checked with this at decode
// (peer/wire_codec.h), and so is every roster address.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace meridian::peer {

// What is wrong with `address` as a site address, for people ("the port must be 1-65535"), or
// nullopt when it is one.
std::optional<std::string> site_address_problem(std::string_view address);

inline bool is_valid_site_address(std::string_view address) { return !site_address_problem(address); }

}  // namespace meridian::peer

// Free TCP ports on 127.0.0.1 for sites that must know each other's address before they start.
#pragma once

#include <cstdint>
#include <vector>

namespace meridian::cli {

// `count` distinct ports that were free a moment ago: each is bound to 127.0.0.1:0 (the kernel picks
// an unused ephemeral port), all are held open together so they differ, then released. Another
// process may take one before the site binds it; the site then fails to start and says so in its log.
// Throws std::runtime_error when a socket cannot be created or bound.
std::vector<std::uint16_t> free_loopback_ports(int count);

}  // namespace meridian::cli

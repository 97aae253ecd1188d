// Free TCP ports on 127.0.0.1 for sites that must know each other's address before they start.
#pragma once

#include <cstdint>
#include <vector>

namespace meridian::cli {

// `count` distinct ports that were free a moment ago, each bound on 127.0.0.1 and all held open
// together so they differ, then released. They come from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), starting at a random place: a port from that range could
// be taken as the source port of another site's outgoing connection before its own site binds it,
// which happened when several sites connect at once. Only when fewer than `count` ports are free there
// does it fall back to ports the kernel picks (127.0.0.1:0). Another listener may still take one
// first; the site then fails to start and says so in its log. Throws error::InternalError when a socket
// cannot be created or no port can be bound.
std::vector<std::uint16_t> free_loopback_ports(int count);

// The first port of the kernel's ephemeral range (32768 when it cannot be read).
std::uint16_t ephemeral_range_start();

}  // namespace meridian::cli

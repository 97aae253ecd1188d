// The remote end of a connected socket descriptor, read with getpeername(2): the transport uses it to
// name a peer's host in diagnostics and to tell one accepted connection from a later one that reuses
// its descriptor.
//
// Thread-safety: pure functions of the descriptor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meridian::peer {

struct SocketPeerAddress {
  std::string host;  // numeric IPv4 or IPv6 address, without brackets
  std::uint16_t port = 0;
  bool ipv6 = false;

  // "ip:port", or "[ip]:port" for IPv6.
  std::string endpoint() const;
};

// The remote address of connected socket `fd`, or nullopt when it cannot be read (the connection is
// closed already, or it is not an IP socket).
std::optional<SocketPeerAddress> socket_peer_address(int fd);

}  // namespace meridian::peer

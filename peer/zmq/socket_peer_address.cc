#include "peer/zmq/socket_peer_address.h"

#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

namespace meridian::peer {

std::string SocketPeerAddress::endpoint() const {
  return ipv6 ? "[" + host + "]:" + std::to_string(port) : host + ":" + std::to_string(port);
}

std::optional<SocketPeerAddress> socket_peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return std::nullopt;
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    if (!::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host)) return std::nullopt;
    return SocketPeerAddress{host, ntohs(in->sin_port), false};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (!::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host)) return std::nullopt;
    return SocketPeerAddress{host, ntohs(in6->sin6_port), true};
  }
  return std::nullopt;
}

}  // namespace meridian::peer

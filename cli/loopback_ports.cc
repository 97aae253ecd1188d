#include "cli/loopback_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "error/error.h"

namespace meridian::cli {
namespace {

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw error::InternalError(std::string("cannot create a TCP socket: ") + std::strerror(errno));
  }
  ~Socket() { ::close(fd_); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket& operator=(Socket&&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Binds `s` to 127.0.0.1:port (0: the kernel picks); returns the port bound, or 0 when it is taken.
std::uint16_t bind_loopback(const Socket& s, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  socklen_t length = sizeof address;
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address) < 0) {
    if (errno == EADDRINUSE || errno == EACCES) return 0;
    throw error::InternalError(std::string("cannot bind a port on 127.0.0.1: ") + std::strerror(errno));
  }
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&address), &length) < 0)
    throw error::InternalError(std::string("cannot read a bound port on 127.0.0.1: ") + std::strerror(errno));
  return ntohs(address.sin_port);
}

constexpr std::uint16_t kLowestPort = 10000;  // well clear of the well-known and registered low ports

}  // namespace

std::uint16_t ephemeral_range_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned first = 0, last = 0;
  if (in >> first >> last && first > 1024 && first <= 65535) return static_cast<std::uint16_t>(first);
  return 32768;
}

std::vector<std::uint16_t> free_loopback_ports(int count) {
  std::vector<Socket> held;
  std::vector<std::uint16_t> ports;
  const std::uint16_t end = ephemeral_range_start();
  if (end > kLowestPort + 2 * count) {
    // A random start, so that simulations launched side by side do not all probe the same ports.
    const unsigned span = end - kLowestPort;
    const unsigned start = std::random_device{}() % span;
    for (unsigned i = 0; i < span && static_cast<int>(ports.size()) < count; ++i) {
      Socket s;
      const auto port = bind_loopback(s, static_cast<std::uint16_t>(kLowestPort + (start + i) % span));
      if (port == 0) continue;
      ports.push_back(port);
      held.push_back(std::move(s));
    }
    if (static_cast<int>(ports.size()) == count) return ports;
    held.clear();
    ports.clear();
  }
  for (int i = 0; i < count; ++i) {
    Socket& s = held.emplace_back();
    const auto port = bind_loopback(s, 0);
    if (port == 0) throw error::InternalError("cannot find a free port on 127.0.0.1: every ephemeral port is taken");
    ports.push_back(port);
  }
  return ports;
}

}  // namespace meridian::cli

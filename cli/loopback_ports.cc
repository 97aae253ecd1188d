#include "cli/loopback_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace meridian::cli {
namespace {

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(std::string("cannot create a TCP socket: ") + std::strerror(errno));
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

}  // namespace

std::vector<std::uint16_t> free_loopback_ports(int count) {
  std::vector<Socket> held;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < count; ++i) {
    Socket& s = held.emplace_back();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address) < 0 ||
        ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&address), &length) < 0)
      throw std::runtime_error(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(errno));
    ports.push_back(ntohs(address.sin_port));
  }
  return ports;
}

}  // namespace meridian::cli

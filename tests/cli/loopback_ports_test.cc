#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "cli/loopback_ports.h"

using meridian::cli::ephemeral_range_start;
using meridian::cli::free_loopback_ports;

namespace {

// Whether a listener can bind 127.0.0.1:port right now.
bool bindable(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("free loopback ports are distinct, free, and outside the range outgoing connections draw from",
          "[cli][simulate][unit]") {
  const auto ports = free_loopback_ports(16);
  REQUIRE(ports.size() == 16);
  CHECK(std::set<std::uint16_t>(ports.begin(), ports.end()).size() == 16);
  const auto ephemeral = ephemeral_range_start();
  for (auto p : ports) {
    INFO("port " << p << ", ephemeral range from " << ephemeral);
    CHECK(p >= 10000);
    CHECK(p < ephemeral);  // a connecting site's source port can never be one of them
    CHECK(bindable(p));
  }
}

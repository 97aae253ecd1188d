#include "peer/site_address.h"

#include <arpa/inet.h>

#include <algorithm>

namespace meridian::peer {

namespace {

constexpr std::string_view kScheme = "tcp://";
constexpr std::size_t kMaxHostBytes = 253;  // the longest DNS name

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

std::optional<std::string> host_problem(std::string_view host) {
  if (host.empty()) return "the host is empty";
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return "an IPv6 host must be written in brackets, e.g. [2001:db8::1]";
    const std::string inner(host.substr(1, host.size() - 2));
    in6_addr addr{};
    // inet_pton takes no zone ("%eth0") and nothing but hex digits, ':' and a dotted tail.
    if (::inet_pton(AF_INET6, inner.c_str(), &addr) != 1) return "'" + inner + "' is not an IPv6 address";
    if (IN6_IS_ADDR_UNSPECIFIED(&addr)) return "the unspecified address [::] names no site";
    return std::nullopt;
  }
  if (host.size() > kMaxHostBytes) return "the host is longer than " + std::to_string(kMaxHostBytes) + " characters";
  if (!std::all_of(host.begin(), host.end(), is_name_char))
    return "the host may hold only letters, digits, '.', '-' and '_' (or be an IPv6 address in brackets)";
  in_addr v4{};
  if (::inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1 && v4.s_addr == INADDR_ANY)
    return "the unspecified address 0.0.0.0 names no site";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> site_address_problem(std::string_view address) {
  if (address.substr(0, kScheme.size()) != kScheme) return "a site address must start with tcp://";
  const std::string_view rest = address.substr(kScheme.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return "a site address must end with :PORT";
  if (auto problem = host_problem(rest.substr(0, colon))) return problem;
  const std::string_view port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "the port must be a number from 1 to 65535";
  const int value = std::stoi(std::string(port));
  if (value < 1 || value > 65535) return "the port must be a number from 1 to 65535";
  return std::nullopt;
}

}  // namespace meridian::peer

// What the ZeroMQ transport learns from libzmq's socket monitors, between real transports on loopback:
// a joining site's reasons for not reaching its bootstrap site (nobody listening, its key refused,
// security that differs, an old key), gone once it is a member; and a secure site's count of
// connections without CURVE.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cli/loopback_ports.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using meridian::tests::eventually;

namespace {

ZmqTransportOptions insecure_options(const std::string& name) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = true;
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = 10s;
  return o;
}

ZmqTransportOptions secure_options(const std::string& name, const CurveKeyPair& keys, const Roster& roster) {
  ZmqTransportOptions o = insecure_options(name);
  o.insecure = false;
  o.keys = keys;
  o.roster = roster;
  return o;
}

bool says(const FederationTransport& t, const std::string& part) {
  for (const auto& problem : t.join_problems())
    if (problem.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a joiner says nobody answers at a bootstrap address where nobody listens", "[peer][zmq][join][cluster]") {
  const std::string address = "tcp://127.0.0.1:" + std::to_string(meridian::cli::free_loopback_ports(1).at(0));
  auto options = insecure_options("beta");
  options.bootstrap = {address};
  ZmqTransport beta(std::move(options));
  REQUIRE(eventually([&] { return !beta.join_problems().empty(); }));
  CHECK(beta.join_problems() ==
        std::vector<std::string>{"no answer from " + address +
                                 " (cannot connect; retrying): is the site running and listening there?"});
}

TEST_CASE("a joiner whose key is not in the other site's roster hears it from the failed handshake",
          "[peer][zmq][join][cluster]") {
  const auto alpha_keys = generate_curve_key_pair(), beta_keys = generate_curve_key_pair();
  Roster alpha_roster, beta_roster;
  alpha_roster.add({"alpha", alpha_keys.public_key, ""});
  beta_roster.add({"alpha", alpha_keys.public_key, ""});
  beta_roster.add({"beta", beta_keys.public_key, ""});
  ZmqTransport alpha(secure_options("alpha", alpha_keys, alpha_roster));
  auto options = secure_options("beta", beta_keys, beta_roster);
  options.bootstrap = {"alpha@" + alpha.endpoint()};
  ZmqTransport beta(std::move(options));
  REQUIRE(eventually([&] { return says(beta, "refused this site's key"); }));
  CHECK(beta.join_problems() ==
        std::vector<std::string>{"alpha (" + alpha.endpoint() +
                                 ") refused this site's key (CURVE handshake denied, ZAP status 400): is this "
                                 "site's public key in that site's roster?"});
  CHECK(alpha.stats().zap_denied >= 1);
  CHECK(alpha.rejections().count(RejectCause::kPlaintext) == 0);
}

TEST_CASE("a joiner that holds an old public key of its bootstrap site hears that the handshake was cut",
          "[peer][zmq][join][cluster]") {
  const auto alpha_keys = generate_curve_key_pair(), old_alpha = generate_curve_key_pair(),
             beta_keys = generate_curve_key_pair();
  Roster alpha_roster, beta_roster;
  alpha_roster.add({"alpha", alpha_keys.public_key, ""});
  alpha_roster.add({"beta", beta_keys.public_key, ""});
  beta_roster.add({"alpha", old_alpha.public_key, ""});  // alpha's key before it made a new pair
  beta_roster.add({"beta", beta_keys.public_key, ""});
  ZmqTransport alpha(secure_options("alpha", alpha_keys, alpha_roster));
  auto options = secure_options("beta", beta_keys, beta_roster);
  options.bootstrap = {"alpha@" + alpha.endpoint()};
  ZmqTransport beta(std::move(options));
  // Transient states may come first (a connection still being retried); the diagnosis settles.
  REQUIRE(eventually([&] { return says(beta, "closed the connection"); }));
  CHECK(beta.join_problems() ==
        std::vector<std::string>{"alpha (" + alpha.endpoint() +
                                 ") closed the connection during the CURVE handshake: is that site started with "
                                 "--insecure, or is the public key this site's roster lists for it not that site's "
                                 "current key?"});
}

TEST_CASE("an insecure joiner at a secure site hears why, and the secure site counts the plain connection",
          "[peer][zmq][join][cluster]") {
  const auto alpha_keys = generate_curve_key_pair();
  Roster roster;
  roster.add({"alpha", alpha_keys.public_key, ""});
  ZmqTransport alpha(secure_options("alpha", alpha_keys, roster));
  auto options = insecure_options("beta");
  options.bootstrap = {alpha.endpoint()};
  ZmqTransport beta(std::move(options));
  // Mostly the secure site closes the connection before its greeting reaches the joiner, sometimes the
  // joiner sees the mechanisms differ: either way it is told that CurveZMQ is wanted.
  REQUIRE(eventually([&] { return says(beta, "this site runs --insecure"); }));
  const auto problems = beta.join_problems();
  REQUIRE(problems.size() == 1);
  CHECK((problems[0] == alpha.endpoint() +
                            " requires CurveZMQ and this site runs --insecure (the handshake mechanisms differ): "
                            "start it with a key pair and the roster" ||
         problems[0] == alpha.endpoint() +
                            " closed the connection during the handshake: it may require CurveZMQ, and this site "
                            "runs --insecure"));
  CHECK(alpha.alive_members() == std::vector<std::string>{"alpha"});
}

TEST_CASE("a secure site counts a connection without CURVE once it sees the handshake's mechanism",
          "[peer][zmq][join][cluster]") {
  const auto alpha_keys = generate_curve_key_pair();
  Roster roster;
  roster.add({"alpha", alpha_keys.public_key, ""});
  ZmqTransport alpha(secure_options("alpha", alpha_keys, roster));
  // A plain ZMTP 3.0 peer that sends its whole greeting (mechanism NULL) at once, so that the secure
  // site reads it before anything else happens (a libzmq peer may give up first on seeing CURVE).
  const auto colon = alpha.endpoint().rfind(':');
  const int port = std::stoi(alpha.endpoint().substr(colon + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::array<unsigned char, 64> greeting{};
  greeting[0] = 0xff;  // signature
  greeting[9] = 0x7f;
  greeting[10] = 3;                       // version 3.0
  std::memcpy(&greeting[12], "NULL", 4);  // mechanism, zero-padded to 20 bytes; as-server 0; filler
  REQUIRE(::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(greeting.size()));
  const bool counted = eventually([&] { return alpha.rejections().count(RejectCause::kPlaintext) == 1; });
  ::close(fd);
  CHECK(counted);
  CHECK(alpha.stats().zap_denied == 0);  // refused before any key was looked at
}

TEST_CASE("a joiner that reaches its bootstrap site has no problems to tell", "[peer][zmq][join][cluster]") {
  ZmqTransport alpha(insecure_options("alpha"));
  auto options = insecure_options("beta");
  options.bootstrap = {alpha.endpoint()};
  ZmqTransport beta(std::move(options));
  const std::vector<std::string> both{"alpha", "beta"};
  REQUIRE(eventually([&] { return beta.alive_members() == both; }));
  CHECK(beta.join_problems().empty());
  CHECK(alpha.rejections().count(RejectCause::kPlaintext) == 0);
}

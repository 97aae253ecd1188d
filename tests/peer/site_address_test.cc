// The one form of a site address (peer/site_address.h), and the wire codec refusing any other in a
// hello or a gossiped member record, so that nothing a peer announces can make a site dial another
// transport or hand libzmq an address it cannot parse.
#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "peer/roster.h"
#include "peer/site_address.h"
#include "peer/wire_codec.h"

using namespace meridian::peer;

TEST_CASE("a site address is exactly tcp://host:port", "[peer][wire][address][unit]") {
  for (const std::string good :
       {"tcp://127.0.0.1:7000", "tcp://fl.st-marys.example.org:7400", "tcp://10.0.0.1:1", "tcp://[::1]:65535",
        "tcp://[2001:db8::7]:7400", "tcp://site_b.internal:7000", "tcp://localhost:80"}) {
    INFO(good);
    CHECK(is_valid_site_address(good));
  }
  const std::string too_long = "tcp://" + std::string(254, 'a') + ":7000";
  for (const std::string& bad : std::vector<std::string>{too_long, "tcp://nohost", "ipc://x", "inproc://zeromq.zap.01", "udp://10.0.0.1:7000", "tcp://:7000", "tcp://host:",
        "tcp://host:0", "tcp://host:65536", "tcp://host:99999999999", "tcp://host:-1", "tcp://host:7a",
        "tcp://eth0;10.0.0.1:7000", "tcp://*:7000", "tcp://0.0.0.0:7000", "tcp://[::]:7000", "tcp://::1:7000",
        "tcp://[::1%lo]:7000", "tcp://[not-v6]:7000", "tcp://host :7000", "tcp://host\n:7000", "tcp://ho\x1bst:7000",
        "tcp://host:7000 ", "tcp://host:7000\n", " tcp://host:7000", "TCP://host:7000", "tcp://user@host:7000",
        "tcp://host/path:7000", ""}) {
    INFO(bad);
    CHECK_FALSE(is_valid_site_address(bad));
    CHECK(site_address_problem(bad));
  }
  CHECK(*site_address_problem("ipc://x") == "a site address must start with tcp://");
  CHECK(*site_address_problem("tcp://host:0") == "the port must be a number from 1 to 65535");
}

TEST_CASE("a hello announcing another address is refused as an address; a member list carrying one does not decode",
          "[peer][wire][address][unit]") {
  for (const std::string bad : {"tcp://nohost", "ipc://x", "inproc://meridian", "tcp://a;b:1", "tcp://h:1\r\nforged"}) {
    INFO(bad);
    const auto decoded = decode_hello(encode_hello(HelloInfo{"b", bad, "", 1, 0, {}, {}}));
    REQUIRE(std::holds_alternative<Rejection>(decoded));
    CHECK(std::get<Rejection>(decoded).cause == RejectCause::kAddress);
    MemberListInfo list;
    list.members = {{"a", "tcp://127.0.0.1:7000", "", 1, MemberState::kAlive}, {"b", bad, "", 1, MemberState::kAlive}};
    CHECK_FALSE(decode_members(encode_members(list)));
  }
  // An empty address says "not known": nothing is dialed for it.
  CHECK(std::holds_alternative<HelloInfo>(decode_hello(encode_hello(HelloInfo{"b", "", "", 1, 0, {}, {}}))));
  MemberListInfo unknown;
  unknown.members = {{"b", "", "", 1, MemberState::kLeft}};
  CHECK(decode_members(encode_members(unknown)) == unknown);
}

TEST_CASE("a roster address is a site address too", "[peer][roster][address][unit]") {
  const std::string key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  CHECK(Roster::parse("a " + key + " tcp://10.0.0.1:7000\n").by_name("a")->address == "tcp://10.0.0.1:7000");
  CHECK_THROWS_WITH(Roster::parse("a " + key + " tcp://nohost\n"), Catch::Contains("must end with :PORT"));
  CHECK_THROWS_WITH(Roster::parse("a " + key + " ipc://x\n"), Catch::Contains("must look like tcp://host:port"));
  Roster r;
  CHECK_THROWS_WITH(r.add({"a", key, "tcp://10.0.0.1:7000\nb " + key}), Catch::Contains("\\x0a"));
}

// A live daemon under attack: `meridian start` with CurveZMQ trains sgp with
// an honest peer on 127.0.0.1 while this test process, holding the peer's roster key, sends it
// malformed, truncated, oversized, wrong-version, wrong-fingerprint, wrong-length, NaN, Inf, huge-weight,
// stale and duplicated messages. Each must be rejected and counted by cause on the daemon's /metrics,
// and training must go on to a sane accuracy with a finite model. A process with a key that is not in
// the roster must get nothing through (the ZAP handler refuses it; counted as zap_denied).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "daemon/checkpoint/checkpoint.h"
#include "peer/curve_keys.h"
#include "peer/wire_codec.h"
#include "proto/meridian.pb.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;
using namespace meridian::peer;

namespace {

// meridian_rejected_messages_total by cause, and the other counters this test reads, from /metrics.
std::map<std::string, double> scrape(int port) {
  std::map<std::string, double> out;
  const auto body = meridian::tests::http_body(meridian::tests::http_get(port, "/metrics"));
  static const std::regex sample(R"((meridian_[a-z_]+(?:\{cause="[a-z_]+"\})?) ([0-9.eE+-]+))");
  std::istringstream lines(body);
  std::smatch m;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_match(line, m, sample)) out[m[1]] = std::stod(m[2]);
  return out;
}

double rejected(const std::map<std::string, double>& m, const std::string& cause) {
  const auto it = m.find("meridian_rejected_messages_total{cause=\"" + cause + "\"}");
  return it == m.end() ? 0.0 : it->second;
}

}  // namespace

TEST_CASE("a live daemon rejects and counts every kind of hostile message and keeps training",
          "[daemon][process][security][hostile]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  std::map<std::string, CurveKeyPair> keys;
  std::string roster;
  for (const std::string name : {"a", "b"}) {
    keys[name] = generate_curve_key_pair();
    write_key_pair(keys[name], dir.path() / ("keys-" + name));
    roster += name + " " + keys[name].public_key + "\n";
  }
  std::ofstream(dir.path() / "roster.txt") << roster;
  auto args = [&](const std::string& name, int index) {
    return StartArgs(name)
        .secure(dir.path() / ("keys-" + name), dir.path() / "roster.txt")
        .set("--metrics-address", index == 0 ? "127.0.0.1:0" : "off")
        .site(index, 2)
        .set("--algo", "sgp")
        .mlp(64)
        .set("--epochs", 4)
        .set("--eval-every", 100000)
        .set("--round-timeout", 5)
        .set("--seed", 3);
  };
  SiteProcess a(dir.path() / "a", args("a", 0));
  const std::string a_endpoint = a.endpoint();
  REQUIRE(a_endpoint.rfind("tcp://127.0.0.1:", 0) == 0);
  SiteProcess b(dir.path() / "b", args("b", 1).join("a@" + a_endpoint));

  // The daemon names its metrics port, wire fingerprint and parameter count in its log.
  std::smatch m;
  std::string log;
  REQUIRE(eventually_from_process([&] {
    log = a.log();
    return std::regex_search(log, std::regex("metrics on http://127\\.0\\.0\\.1:[0-9]+/metrics")) || a.exited();
  }));
  INFO("a:\n" << a.log() << "\nb:\n" << b.log());
  REQUIRE(std::regex_search(log, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")));
  const int port = std::stoi(m[1]);
  REQUIRE(std::regex_search(log, m, std::regex("([0-9]+) parameters, wire fingerprint ([0-9a-f]{16})")));
  const std::size_t elements = std::stoul(m[1]);
  const std::uint64_t fingerprint = std::stoull(m[2], nullptr, 16);

  // Attack once training is well past the first 256 rounds, so that round 0 is outside the window.
  // (/metrics, not the control socket: the control socket may wait while a mix is in flight.)
  auto step = [&] { return a.exited() ? 0.0 : scrape(port)["meridian_step"]; };
  REQUIRE(eventually_from_process([&] { return a.exited() || step() > 300; }));
  REQUIRE_FALSE(a.exited());
  const auto step_before = step();

  // The attacker: a raw socket holding b's roster key (a stolen key, or b's own software gone bad).
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::curve_serverkey, keys.at("a").public_key);
  s.set(zmq::sockopt::curve_publickey, keys.at("b").public_key);
  s.set(zmq::sockopt::curve_secretkey, keys.at("b").secret_key);
  s.connect(a_endpoint);
  std::uint64_t id = 1u << 30;
  auto send = [&](const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      REQUIRE(s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
  };
  auto share = [&](std::uint64_t round, float value = 0.01f) {
    Message msg;
    msg.kind = MessageKind::kPushSum;
    msg.round = round;
    msg.tag = 0;
    msg.total = elements;
    msg.weight = 0.5;
    msg.payload.assign(elements, value);
    return msg;
  };
  auto frames = [&](const Message& msg, std::uint64_t fp) {
    auto c = encode_message(msg, fp, id++, WireLimits{});
    REQUIRE(c.size() == 1);
    std::vector<std::string> out{c[0].header};
    if (c[0].elements) out.emplace_back(reinterpret_cast<const char*>(msg.payload.data()), c[0].elements * 4);
    return out;
  };
  // Rounds far ahead of the run (inside the accepted window) never meet a real round, so the one
  // valid message below cannot displace b's real shares.
  const std::uint64_t future = 60000;

  // First an outsider whose key the roster does not list: the ZAP handler refuses it, so none of its
  // NaN, wrong-fingerprint shares reaches validation (no rejection counter moves).
  const auto outsider = generate_curve_key_pair();
  zmq::socket_t o(ctx, zmq::socket_type::dealer);
  o.set(zmq::sockopt::linger, 0);
  o.set(zmq::sockopt::curve_serverkey, keys.at("a").public_key);
  o.set(zmq::sockopt::curve_publickey, outsider.public_key);
  o.set(zmq::sockopt::curve_secretkey, outsider.secret_key);
  o.connect(a_endpoint);
  for (int i = 0; i < 5; ++i) {
    for (const auto& f : frames(share(future + 10 + i, std::nanf("")), fingerprint ^ 1))
      (void)o.send(zmq::buffer(f), zmq::send_flags::dontwait);
  }
  REQUIRE(eventually_from_process([&] { return a.exited() || scrape(port)["meridian_zap_denied_total"] >= 1; }));
  REQUIRE_FALSE(a.exited());
  {
    const auto after_outsider = scrape(port);
    for (const auto& [name, value] : after_outsider) {
      INFO(name);
      if (name.rfind("meridian_rejected_messages_total", 0) == 0) CHECK(value == 0);
    }
  }

  // Then the insider with b's key.
  std::map<std::string, int> expected;
  auto attack = [&](const std::string& cause, const std::vector<std::string>& f) {
    send(f);
    ++expected[cause];
  };
  attack("malformed", {std::string("\x0a\xff\xff\xff", 4)});
  attack("oversized", {std::string(100 * 1024, 'x')});  // header frame above the 64 KiB cap
  {
    meridian::wire::Header h;
    REQUIRE(h.ParseFromString(frames(share(future), fingerprint)[0]));
    h.set_payload_elements(1ull << 40);  // claims a 4 TiB payload
    h.set_chunk_elements(1ull << 40);
    attack("oversized", {h.SerializeAsString()});
    h.ParseFromString(frames(share(future), fingerprint)[0]);
    h.set_protocol_version(kProtocolVersion + 1);
    attack("version", {h.SerializeAsString(), std::string(elements * 4, '\0')});
  }
  {
    auto f = frames(share(future + 1), fingerprint);
    f[1].resize(f[1].size() / 2);
    attack("truncated", f);
  }
  attack("fingerprint", frames(share(future + 2), fingerprint ^ 1));
  {
    Message wrong = share(future + 3);
    wrong.total = elements + 1;
    wrong.payload.push_back(0.0f);
    attack("tensor_length", frames(wrong, fingerprint));
  }
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    Message msg = share(future + 4);
    msg.payload[elements / 2] = bad;
    msg.tag = static_cast<std::uint32_t>(expected["non_finite"]);
    attack("non_finite", frames(msg, fingerprint));
  }
  for (double weight : {1e9, 10.0, 0.0}) {  // 10: above twice the roster's two sites
    Message msg = share(future + 5);
    msg.weight = weight;
    msg.tag = static_cast<std::uint32_t>(expected["weight_range"]);
    attack("weight_range", frames(msg, fingerprint));
  }
  attack("round_stale", frames(share(0), fingerprint));
  attack("round_ahead", frames(share(future * 1000), fingerprint));
  const auto valid = frames(share(future + 6), fingerprint);
  send(valid);                // accepted once (stashed for a round the run never reaches)...
  attack("replayed", valid);  // ...and its copy is a replay

  // What a failure shows: each cause's count against what was sent, and a's log.
  auto counted = [&] {
    const auto now = scrape(port);
    std::string text;
    for (const auto& [cause, count] : expected)
      text += cause + ": " + std::to_string(rejected(now, cause)) + " of " + std::to_string(count) + "\n";
    return text + "log of a:\n" + a.log();
  };
  const bool all_counted = eventually_from_process(
      [&] {
        const auto now = scrape(port);
        for (const auto& [cause, count] : expected)
          if (rejected(now, cause) < count) return false;
        return true;
      },
      std::chrono::seconds(60));
  INFO(counted());
  REQUIRE(all_counted);
  const auto after_attack = scrape(port);
  for (const auto& [cause, count] : expected) {
    INFO("cause " << cause);
    CHECK(rejected(after_attack, cause) == count);
  }

  // Training went on: the step advanced past the attack, and the run finishes with a finite model.
  CHECK(eventually_from_process([&] { return a.exited() || step() > step_before + 50; }));
  CHECK(a.wait_exit() == 0);
  CHECK(b.wait_exit() == 0);
  REQUIRE(a.has_result());
  const auto result = nlohmann::json::parse(meridian::tests::file_contents(a.run_dir() / "result.json"));
  const double accuracy = result["test_accuracy"].get<double>();
  CHECK(result["steps"].get<double>() > step_before + 50);
  CHECK(accuracy > 0.7);  // four epochs of a small MLP on half of Fashion-MNIST each: about 0.84
  const auto checkpoint = meridian::daemon::read_checkpoint_file(result["final_checkpoint"].get<std::string>());
  CHECK(std::isfinite(checkpoint.push_sum_weight));
  CHECK(checkpoint.push_sum_weight > 0);
  CHECK(checkpoint.push_sum_weight < 4);
  CHECK(std::all_of(checkpoint.parameters.begin(), checkpoint.parameters.end(),
                    [](float v) { return std::isfinite(v); }));
}

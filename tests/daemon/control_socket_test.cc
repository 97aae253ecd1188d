#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "daemon/control/control_client.h"
#include "daemon/control/control_server.h"
#include "daemon/control/unix_socket_probe.h"
#include "error/exit_code.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;
using meridian::tests::TempDir;

namespace {

StatusReport sample_status() {
  StatusReport s;
  s.site = "oregon";
  s.algorithm = "sgp";
  s.state = "training";
  s.listen = "tcp://0.0.0.0:7400";
  s.step = 1200;
  s.epoch = 3;
  s.train_loss = 0.4123;
  s.test_accuracy = 0.862;
  s.peers_alive = 3;
  s.peers_known = 4;
  s.view_id = 7;
  s.staleness = 1;
  s.push_sum_weight = 0.97;
  s.samples_per_second = 5400;
  s.bytes_per_second = 2.4e6;
  s.uptime_seconds = 3725;
  s.last_checkpoint = "run/checkpoints/checkpoint-00000000000000001200.mrdn";
  s.checkpoint_age_seconds = 42;
  return s;
}

std::vector<PeerReport> sample_peers() {
  return {{"oregon", "tcp://10.0.0.1:7400", "alive", 0, std::nullopt, std::nullopt, 0, 0},
          {"ohio", "tcp://10.0.0.2:7400", "alive", 1, 0.05, 0.2, 1000000, 2000},
          {"tokyo", "tcp://10.0.0.4:7400", "suspect", std::nullopt, std::nullopt, 12.5, 0, 0}};
}

class FakeDaemon : public ControlHandler {
 public:
  StatusReport status() override {
    if (fail_status) throw std::runtime_error("trainer state unavailable");
    return report;
  }
  StatusReport report = sample_status();
  std::vector<PeerReport> peers() override { return sample_peers(); }
  LeaveReport leave() override {
    const bool first = !leaving.exchange(true);
    return {first, first ? "oregon is leaving the federation" : "oregon is already leaving",
            first ? std::optional<std::uint64_t>(1210) : std::nullopt};
  }
  std::atomic<bool> leaving{false};
  std::atomic<bool> fail_status{false};
};

// The communication thread's part: owns the server socket and polls it, as the daemon will.
class PollingThread {
 public:
  PollingThread(const std::string& path, ControlHandler& handler) {
    std::promise<void> ready;
    auto started = ready.get_future();
    thread_ = std::thread([&, path, ready = std::move(ready)]() mutable {
      std::optional<ControlServer> server;
      try {
        server.emplace(path, handler);
      } catch (...) {
        ready.set_exception(std::current_exception());
        return;
      }
      ready.set_value();
      while (!stop_) server->serve(std::chrono::milliseconds(20));
    });
    try {
      started.get();
    } catch (...) {
      thread_.join();
      throw;
    }
  }
  ~PollingThread() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Command {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs the real `meridian` binary in a child process, keeping its standard error apart.
Command run_meridian(const std::string& args, const TempDir& tmp) {
  const auto err = tmp.path() / "err.txt";
  const auto run = meridian::tests::run_meridian(args + " 2> " + err.string());
  return {run.exit_code, run.output, meridian::tests::file_contents(err)};
}

}  // namespace

TEST_CASE("control replies round-trip through JSON", "[daemon][control][unit]") {
  CHECK(decode_status_reply(encode_status_reply(sample_status())) == sample_status());
  CHECK(decode_peers_reply(encode_peers_reply(sample_peers())) == sample_peers());
  const LeaveReport leave{true, "bye", 99};
  CHECK(decode_leave_reply(encode_leave_reply(leave)) == leave);
  CHECK(decode_peers_reply(encode_peers_reply({})).empty());

  // A diverged loss is NaN, which JSON cannot hold: it travels as null and comes back NaN.
  auto diverged = sample_status();
  diverged.train_loss = std::nan("");
  const auto loss = decode_status_reply(encode_status_reply(diverged)).train_loss;
  REQUIRE(loss);
  CHECK(std::isnan(*loss));

  CHECK(decode_request(encode_request(ControlCommand::kLeave)) == ControlCommand::kLeave);
  CHECK_THROWS_WITH(decode_request("not json"), Contains("not a JSON object"));
  CHECK_THROWS_WITH(decode_request(R"({"version":1,"command":"reboot"})"), Contains("unknown command 'reboot'"));
  CHECK_THROWS_WITH(decode_request(R"({"version":9,"command":"status"})"), Contains("unsupported protocol version"));
  CHECK_THROWS_WITH(decode_status_reply(encode_error_reply("busy")), Contains("the daemon says: busy"));
  CHECK_THROWS_WITH(decode_status_reply(R"({"ok":true,"status":{"site":1}})"), Contains("malformed \"status\""));
  CHECK_THROWS_WITH(decode_peers_reply("[]"), Contains("not a JSON object"));
}

TEST_CASE("a client talks to a server polled by another thread", "[daemon][control][cluster]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "run" / "control.sock").string();
  FakeDaemon daemon;
  {
    PollingThread comm(path, daemon);
    // Only the daemon's user may talk to it.
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    ControlClient client(path);
    CHECK(client.status() == sample_status());
    CHECK(client.peers() == sample_peers());
    const auto first = client.leave();
    CHECK(first.accepted);
    CHECK(first.effective_round == std::optional<std::uint64_t>(1210));
    CHECK_FALSE(client.leave().accepted);

    // A handler that throws becomes an error reply; the server keeps serving.
    daemon.fail_status = true;
    CHECK_THROWS_WITH(client.status(),
                      Contains("the daemon says: the daemon could not answer: trainer state unavailable"));
    daemon.fail_status = false;
    CHECK(client.status().step == 1200);

    // Garbage gets an error reply too.
    CHECK_THAT(client.exchange("{\"version\":1}"), Contains("\"ok\":false") && Contains("no \\\"command\\\""));

    // A second daemon on the same socket is refused instead of stealing it.
    FakeDaemon second;
    CHECK_THROWS_WITH(ControlServer(path, second), Contains("in use by a running daemon"));
  }
  // The socket file goes away with the server.
  CHECK(probe_unix_socket(path) == UnixSocketState::kAbsent);
  CHECK_THROWS_AS(ControlClient(path).status(), NoDaemonError);
}

TEST_CASE("the client says clearly when no daemon is there", "[daemon][control][process]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  CHECK_THROWS_WITH(ControlClient(path).status(), Contains("no daemon is running at " + path) &&
                                                      Contains("no control socket there") &&
                                                      Contains("meridian start --config FILE"));

  // A daemon killed without cleaning up leaves its socket file behind.
  {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      FakeDaemon daemon;
      ControlServer server(path, daemon);
      ::raise(SIGKILL);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
  }
  REQUIRE(std::filesystem::exists(path));
  CHECK(probe_unix_socket(path) == UnixSocketState::kStale);
  CHECK_THROWS_WITH(ControlClient(path).peers(), Contains("left from a daemon that stopped"));

  // The next daemon binds over the stale file.
  FakeDaemon daemon;
  PollingThread comm(path, daemon);
  CHECK(ControlClient(path).status().site == "oregon");

  // A regular file is not a socket.
  const auto plain = (tmp.path() / "plain").string();
  std::ofstream(plain) << "x";
  CHECK_THROWS_WITH(ControlClient(plain).status(), Contains("is not a control socket"));
  CHECK_THROWS_WITH(ControlServer(plain, daemon), Contains("is not a socket"));
  CHECK_THROWS_WITH(ControlServer("/tmp/" + std::string(120, 'x'), daemon),
                    Contains("longer than a Unix socket allows"));
}

TEST_CASE("the reply to leave arrives even when the daemon closes the socket right after",
          "[daemon][control][cluster]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  FakeDaemon daemon;
  std::promise<void> bound;
  auto ready = bound.get_future();
  std::thread comm([&] {
    {
      ControlServer server(path, daemon);
      bound.set_value();
      while (server.serve(std::chrono::milliseconds(20)) == 0) continue;
    }  // the daemon exits: socket closed and context terminated at once
  });
  ready.get();
  const auto leave = ControlClient(path).leave();
  comm.join();
  CHECK(leave.accepted);
  CHECK(probe_unix_socket(path) == UnixSocketState::kAbsent);
}

TEST_CASE("a daemon that does not answer in time gives a clear error", "[daemon][control][cluster]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  FakeDaemon daemon;
  ControlServer server(path, daemon);  // bound, but nobody polls it
  CHECK_THROWS_WITH(ControlClient(path, std::chrono::milliseconds(200)).status(),
                    Contains("did not answer within 200 ms"));
}

TEST_CASE("meridian status, peers and leave talk to a running daemon", "[daemon][control][process]") {
  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  FakeDaemon daemon;
  PollingThread comm(path, daemon);

  auto status = run_meridian("status --socket " + path, tmp);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Contains("oregon (sgp), training") && Contains("step        1200  (epoch 3)") &&
                             Contains("accuracy    86.2%") && Contains("3 alive of 4 known (view 7)") &&
                             Contains("5400 samples/s, 2.4 MB/s") && Contains("(42 s ago)") &&
                             Contains("uptime      1 h 02 min"));

  auto json = run_meridian("status --json --socket " + path, tmp);
  CHECK(json.exit_code == 0);
  CHECK_THAT(json.out, Contains("\"step\": 1200") && Contains("\"test_accuracy\": 0.862"));

  // The socket can also be found through the site's config file.
  const auto config = tmp.path() / "site.toml";
  std::ofstream(config) << "name = \"oregon\"\ncontrol-socket = \"" << path << "\"\n";
  auto peers = run_meridian("peers --config " + config.string(), tmp);
  CHECK(peers.exit_code == 0);
  CHECK_THAT(peers.out, Contains("NAME") && Contains("ohio") && Contains("alive") && Contains("50 ms") &&
                            Contains("1.0 MB") && Contains("tokyo") && Contains("suspect"));
  // LAST HEARD: how long ago, and "-" for the site itself.
  CHECK_THAT(peers.out, Contains("200 ms") && Contains("12 s"));
  CHECK(std::regex_search(peers.out, std::regex("oregon +alive +0 +- +- ")));
  const auto peers_json = run_meridian("peers --json --socket " + path, tmp).out;
  CHECK_THAT(peers_json, Contains("\"rank\": null") && Contains("\"last_heard_seconds\": null") &&
                             Contains("\"last_heard_seconds\": 12.5"));

  auto leave = run_meridian("leave --socket " + path, tmp);
  CHECK(leave.exit_code == 0);
  CHECK_THAT(leave.out, Contains("oregon is leaving the federation (the view changes at round 1210)"));
  auto again = run_meridian("leave --json --socket " + path, tmp);
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.out, Contains("\"accepted\": false"));
}

TEST_CASE("before the first progress report, status says loss and throughput are not measured yet",
          "[daemon][control][process]") {
  StatusReport fresh = sample_status();
  fresh.train_loss.reset();
  fresh.test_accuracy.reset();
  fresh.samples_per_second.reset();
  fresh.bytes_per_second.reset();
  // Absent in JSON (a diverged loss travels as null and comes back NaN: a measurement).
  const auto text = encode_status_reply(fresh);
  CHECK_THAT(text, !Contains("train_loss") && !Contains("samples_per_second"));
  CHECK(decode_status_reply(text) == fresh);

  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  FakeDaemon daemon;
  daemon.report = fresh;
  PollingThread comm(path, daemon);
  const auto status = run_meridian("status --socket " + path, tmp);
  INFO(status.out);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Contains("loss        not measured yet\n") && Contains("accuracy    -\n") &&
                             Contains("throughput  not measured yet\n"));
  CHECK_THAT(status.out, !Contains("samples/s"));
}

TEST_CASE("meridian status without a daemon exits with the user error code and a hint", "[daemon][control][process]") {
  TempDir tmp;
  const auto result = run_meridian("status --socket " + (tmp.path() / "none.sock").string(), tmp);
  CHECK(result.exit_code == meridian::error::kExitUser);
  CHECK_THAT(result.err, Contains("no daemon is running at") && Contains("meridian start --config FILE"));
  const auto help = run_meridian("leave --help", tmp);
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Contains("Examples:") && Contains("meridian leave --config oregon.toml"));
}

TEST_CASE("status carries a shape chosen from the network and its figures, and nothing for a fixed shape",
          "[daemon][control][auto_shape][unit]") {
  auto status = sample_status();
  status.shape = "D = 3, P = 24";
  status.shape_since_round = 480;
  status.shape_round_trip_seconds = 0.12;
  status.shape_step_seconds = 0.04;
  CHECK(decode_status_reply(encode_status_reply(status)) == status);
  const auto json = to_json_text(status);
  CHECK_THAT(json, Contains("\"shape\"") && Contains("\"shape_since_round\"") &&
                       Contains("\"shape_round_trip_seconds\"") && Contains("\"shape_step_seconds\""));
  // Chosen but not measured yet: the default shape, without figures.
  status.shape_round_trip_seconds.reset();
  status.shape_step_seconds.reset();
  CHECK(decode_status_reply(encode_status_reply(status)) == status);
  CHECK_THAT(to_json_text(status), !Contains("shape_round_trip_seconds"));
  // A fixed shape: no keys at all.
  const auto fixed = sample_status();
  CHECK(decode_status_reply(encode_status_reply(fixed)) == fixed);
  CHECK_THAT(to_json_text(fixed), !Contains("\"shape"));
}

TEST_CASE("status carries the run's progress and the site's notes, and the command shows them",
          "[daemon][control][process]") {
  auto status = sample_status();
  status.total_steps = 5000;
  status.percent_done = 24.0;
  status.eta_seconds = 380;
  status.notes = {"gamma is a member at ohio but this site's roster (roster.txt) does not list it"};
  CHECK(decode_status_reply(encode_status_reply(status)) == status);
  CHECK_THAT(to_json_text(status), Contains("\"total_steps\": 5000") && Contains("\"percent_done\": 24.0") &&
                                       Contains("\"eta_seconds\": 380.0") && Contains("\"notes\": ["));
  // Before the run's rounds are agreed, and with nothing to note: no keys at all.
  const auto plain = sample_status();
  CHECK(decode_status_reply(encode_status_reply(plain)) == plain);
  CHECK_THAT(to_json_text(plain), !Contains("total_steps") && !Contains("eta_seconds") && !Contains("notes"));

  TempDir tmp;
  const std::string path = (tmp.path() / "control.sock").string();
  FakeDaemon daemon;
  daemon.report = status;
  PollingThread comm(path, daemon);
  const auto shown = run_meridian("status --socket " + path, tmp);
  INFO(shown.out);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.out, Contains("step        1200 of 5000 rounds (24.0%), about 6 min 20 s left  (epoch 3)\n") &&
                            Contains("note        gamma is a member at ohio but this site's roster (roster.txt) does "
                                     "not list it\n"));
}

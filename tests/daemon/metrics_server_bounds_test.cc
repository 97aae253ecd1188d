// The metrics and status server under hostile clients: an oversized request body, slow senders,
// headers without end, more connections than workers. A running daemon refuses each, counts it in
// meridian_http_refused_total, keeps its memory bounded and keeps answering scrapes.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "daemon/metrics/metrics_server.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/http_get.h"
#include "tests/daemon/site_process.h"
#include "tests/support/temp_dir.h"

using Catch::Matchers::Contains;
using meridian::daemon::MetricsRegistry;
using meridian::daemon::MetricsServer;
using meridian::tests::eventually_from_process;
using meridian::tests::http_body;
using meridian::tests::http_get;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;

namespace {

// A TCP connection to 127.0.0.1:`port`, closed by the destructor.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  // Sends all of `data`; false once the peer has closed or reset the connection.
  bool send(const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Whether the server has closed its end: a read returns end-of-file or a reset. Never blocks.
  bool closed_by_server() {
    char byte;
    for (;;) {
      const ssize_t n = ::recv(fd_, &byte, 1, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
      // a response (503, 400) before the close: read on
    }
  }
  // Everything the server sends until it closes.
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// The pid of the daemon that holds `run_dir` (it writes it into its lock file), or 0.
pid_t daemon_pid(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / ".meridian.lock");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// VmHWM (peak resident memory) of process `pid` in bytes, or -1.
long long peak_rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

// The value of meridian_http_refused_total{cause="CAUSE"} in a /metrics body, or 0 when absent.
double refused(const std::string& body, const std::string& cause) {
  const std::string name = "meridian_http_refused_total{cause=\"" + cause + "\"} ";
  const auto at = body.find(name);
  return at == std::string::npos ? 0 : std::stod(body.substr(at + name.size()));
}

std::string metrics_of(int port) { return http_body(http_get(port, "/metrics")); }

// A daemon training alone on a small table with its metrics server on a free port of 127.0.0.1.
struct LoneSite {
  TempDir dir;
  SiteProcess site;
  int port = 0;
  explicit LoneSite(const std::string& metrics_address = "127.0.0.1:0")
      : site(dir.path() / "run",
             meridian::tests::training_site_args("solo", 0, 1, meridian::tests::write_small_table(dir.path()))
                 .set("--algo", "local")
                 .set("--metrics-address", metrics_address)) {}
  bool wait_for_metrics() {
    return eventually_from_process([&] {
             port = meridian::tests::metrics_port(site.log());
             return port != 0 || site.exited();
           }) &&
           port != 0;
  }
};

}  // namespace

TEST_CASE("a 400 MB POST to a running daemon is refused and its peak memory stays far below the body",
          "[daemon][metrics][security][process]") {
  LoneSite lone;
  INFO(lone.site.log());
  REQUIRE(lone.wait_for_metrics());
  REQUIRE_THAT(metrics_of(lone.port), Contains("meridian_step"));
  const pid_t pid = daemon_pid(lone.site.run_dir());
  REQUIRE(pid > 0);
  const long long before = peak_rss_bytes(pid);
  REQUIRE(before > 0);

  constexpr std::size_t kBody = 400'000'000;
  const std::string chunk(1 << 20, 'x');
  std::size_t sent = 0;
  {
    Connection post(lone.port);
    REQUIRE(post.connected());
    REQUIRE(
        post.send("POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                  "Content-Length: " +
                  std::to_string(kBody) + "\r\n\r\n"));
    while (sent < kBody && post.send(chunk)) sent += chunk.size();
  }
  // A GET with a body is refused the same way.
  {
    Connection get(lone.port);
    REQUIRE(get.connected());
    REQUIRE(
        get.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(kBody) + "\r\n\r\n"));
    for (std::size_t n = 0; n < 64 && get.send(chunk); ++n) {
    }
  }
  const long long after = peak_rss_bytes(pid);
  const std::string body = metrics_of(lone.port);
  INFO("sent " << sent << " bytes of the POST body; peak RSS " << before << " -> " << after);
  CHECK(sent < kBody);  // the server closed the connection instead of reading the body
  CHECK(after - before < 32ll << 20);
  CHECK(refused(body, "method") == 1);
  CHECK(refused(body, "body") == 1);
  CHECK_THAT(body, Contains("meridian_step"));
  CHECK_FALSE(lone.site.exited());
}

TEST_CASE("slow senders holding connections to a running daemon do not block a /metrics scrape",
          "[daemon][metrics][security][process]") {
  LoneSite lone;
  INFO(lone.site.log());
  REQUIRE(lone.wait_for_metrics());
  // Twice the two workers the server once had: each sends half a request and then nothing.
  std::vector<std::unique_ptr<Connection>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<Connection>(lone.port));
    REQUIRE(slow.back()->connected());
    REQUIRE(slow.back()->send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  }
  const auto response = http_get(lone.port, "/metrics");
  CHECK_THAT(response, Contains("200 OK"));
  const auto body = http_body(response);
  CHECK_THAT(body, Contains("meridian_step"));
  // The scrape was answered while every slow sender still held its connection: none had been cut.
  CHECK(refused(body, "slow") == 0);
  for (auto& c : slow) CHECK_FALSE(c->closed_by_server());
}

TEST_CASE("the metrics server answers 503 at once when every worker is taken", "[daemon][metrics][security][cluster]") {
  MetricsRegistry registry;
  MetricsServer::Limits limits;
  limits.workers = 2;
  MetricsServer server(registry, "127.0.0.1:0", {}, limits);
  Connection first(server.port()), second(server.port());
  REQUIRE(first.send("GET /metrics HTTP/1.1\r\n"));
  REQUIRE(second.send("GET /metrics HTTP/1.1\r\n"));
  // Connections are accepted in order, so both slow ones hold a worker when the third arrives; it is
  // turned away rather than queued behind them.
  Connection third(server.port());
  CHECK_THAT(third.read_all(), Contains("503 Service Unavailable"));
  CHECK_FALSE(first.closed_by_server());
  CHECK_FALSE(second.closed_by_server());
  // The server stops promptly although two clients still hold connections (the destructor joins).
}

TEST_CASE("the metrics server cuts slow connections at their deadline and counts them",
          "[daemon][metrics][security][cluster]") {
  MetricsRegistry registry;
  registry.gauge("up", "Up.").set(1);
  MetricsServer::Limits limits;
  limits.workers = 2;
  limits.deadline = std::chrono::milliseconds(200);
  MetricsServer server(registry, "127.0.0.1:0", {}, limits);
  Connection first(server.port()), second(server.port());
  REQUIRE(first.send("GET /metrics HTTP/1.1\r\n"));
  REQUIRE(second.send("GET /metrics HTTP/1.1\r\nX-Slow: "));
  REQUIRE(eventually_from_process([&] { return first.closed_by_server() && second.closed_by_server(); }));
  std::string body;
  REQUIRE(eventually_from_process([&] {
    body = metrics_of(server.port());
    return refused(body, "slow") == 2;
  }));
  CHECK_THAT(body, Contains("up 1"));
}

TEST_CASE("the metrics server stops reading a request at its size limit", "[daemon][metrics][security][cluster]") {
  MetricsRegistry registry;
  MetricsServer server(registry, "127.0.0.1:0");
  Connection endless(server.port());
  REQUIRE(endless.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  const std::string header = "X-Padding: " + std::string(1000, 'p') + "\r\n";
  std::size_t sent = 0;
  while (sent < (64u << 20) && endless.send(header)) sent += header.size();
  INFO("sent " << sent << " bytes of headers");
  CHECK(sent < (64u << 20));
  std::string body;
  REQUIRE(eventually_from_process([&] {
    body = metrics_of(server.port());
    return refused(body, "too_large") == 1;
  }));
}

TEST_CASE("a metrics server bound beyond loopback says so; on loopback it does not",
          "[daemon][metrics][security][cluster]") {
  MetricsRegistry registry;
  CHECK(MetricsServer(registry, "127.0.0.1:0").loopback_only());
  CHECK_FALSE(MetricsServer(registry, "0.0.0.0:0").loopback_only());
}

TEST_CASE("a daemon whose metrics server listens beyond loopback warns in its log",
          "[daemon][metrics][security][process]") {
  LoneSite lone("0.0.0.0:0");
  INFO(lone.site.log());
  REQUIRE(eventually_from_process(
      [&] { return lone.site.log().find("metrics on http://0.0.0.0:") != std::string::npos || lone.site.exited(); }));
  CHECK_THAT(lone.site.log(), Contains("are not limited to this machine") && Contains("--metrics-address 127.0.0.1:"));
}

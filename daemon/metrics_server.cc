#include "daemon/metrics_server.h"

#include <httplib.h>

#include <atomic>
#include <charconv>
#include <thread>

namespace meridian::daemon {
namespace {

struct HostPort {
  std::string host;
  int port = 0;
};

HostPort parse_address(const std::string& address) {
  const auto fail = [&](const std::string& why) {
    return MetricsServerError("metrics address '" + address + "': " + why +
                              " (expected HOST:PORT, e.g. 127.0.0.1:9400, or port 0 for any free port)");
  };
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw fail("no port");
  HostPort hp;
  hp.host = address.substr(0, colon);
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  if (hp.host.empty()) throw fail("no host");
  const std::string port = address.substr(colon + 1);
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), hp.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || hp.port < 0 || hp.port > 65535) {
    throw fail("port '" + port + "' is not a number in 0..65535");
  }
  return hp;
}

}  // namespace

struct MetricsServer::Impl {
  httplib::Server server;
  HostPort bound;
  std::atomic<bool> finished{false};
  std::thread listener;
};

MetricsServer::MetricsServer(const MetricsRegistry& registry, const std::string& address, PageSource status_page)
    : impl_(std::make_unique<Impl>()) {
  impl_->bound = parse_address(address);
  auto& server = impl_->server;
  // Scrapes are rare and small: two workers instead of httplib's default of at least eight threads.
  // httplib takes ownership of the pool it is handed.
  // httplib's default sets SO_REUSEPORT, which lets a second daemon bind the same port and share the
  // scrapes; SO_REUSEADDR alone still allows a restart while old connections sit in TIME_WAIT.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (status_page) {
    const auto page = [status_page](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(status_page(), "text/html; charset=utf-8");
    };
    server.Get("/", page);
    server.Get("/status", page);
  } else {
    server.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("Meridian daemon: metrics are at /metrics\n", "text/plain");
    });
  }
  if (impl_->bound.port == 0) {
    impl_->bound.port = server.bind_to_any_port(impl_->bound.host);
    if (impl_->bound.port < 0) impl_->bound.port = 0;
  } else if (!server.bind_to_port(impl_->bound.host, impl_->bound.port)) {
    impl_->bound.port = 0;
  }
  if (impl_->bound.port == 0) {
    throw MetricsServerError("metrics address '" + address +
                             "': cannot listen there (port in use, or not an address of this machine); "
                             "choose another with --metrics-address, or 'off'");
  }
  impl_->listener = std::thread([impl = impl_.get()] {
    impl->server.listen_after_bind();
    impl->finished = true;
  });
}

MetricsServer::~MetricsServer() {
  // stop() only acts on a running server, so wait until the listener has really started (or ended).
  while (!impl_->server.is_running() && !impl_->finished) std::this_thread::yield();
  impl_->server.stop();
  impl_->listener.join();
}

const std::string& MetricsServer::host() const { return impl_->bound.host; }
int MetricsServer::port() const { return impl_->bound.port; }

std::string MetricsServer::url() const {
  const bool v6 = impl_->bound.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + impl_->bound.host + "]" : impl_->bound.host) + ":" +
         std::to_string(impl_->bound.port) + "/metrics";
}

}  // namespace meridian::daemon

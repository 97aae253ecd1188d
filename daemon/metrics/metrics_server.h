// Serves a MetricsRegistry on GET /metrics over HTTP (cpp-httplib parses and routes) for Prometheus to
// scrape, and an HTML status page (daemon/status/status_page.h) on GET / and GET /status when the daemon gives
// one. RAII: the constructor binds and starts serving, the destructor stops and joins.
//
// Bounded, because whoever reaches the address (every local user, and the network when it is bound
// beyond loopback) may be hostile:
// - one request per connection, read and answered within the limits' `deadline` from its accept,
//   however slowly the client sends or reads; then the connection is closed;
// - at most `max_request_bytes` read per connection (request line and headers). Only GET and HEAD
//   are served: another method is answered 405 and a request with a body 413, before any of the body
//   is read;
// - at most `workers` connections at once; one more is answered 503 and closed at once, so a scrape
//   never waits in a queue behind slow clients.
// Memory therefore stays below workers × max_request_bytes plus the pages served. Refusals are
// counted in meridian_http_refused_total{cause="method"|"body"|"too_large"|"slow"|"busy"}, which
// /metrics serves after the registry's own metrics.
//
// Threads: one acceptor and `workers` workers; they only read the registry (which is thread-safe) and
// call the page source, and never touch ZeroMQ sockets or training state.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "daemon/metrics/metrics_registry.h"
#include "error/error.h"

namespace meridian::daemon {

class MetricsServerError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// What one MetricsServer allows (see above); the defaults are what a daemon uses.
struct MetricsServerLimits {
  std::size_t workers = 8;
  std::size_t max_request_bytes = 64 * 1024;
  std::chrono::milliseconds deadline{10000};
};

class MetricsServer {
 public:
  using Limits = MetricsServerLimits;

  // `address` is "HOST:PORT" ("[::1]:9400" for IPv6); port 0 picks a free port (see port()).
  // `registry` must outlive the server. Throws MetricsServerError naming the address when it is
  // malformed or cannot be bound (in use, not a local address).
  // `status_page` (called on the server's threads, so thread-safe; it must outlive the server) returns
  // the HTML of the status page; without one, GET / answers with a line of text.
  // Logs a warning (spdlog) when the address is not a loopback address: the metrics and the status
  // page are then readable by anyone who can reach it.
  using PageSource = std::function<std::string()>;
  MetricsServer(const MetricsRegistry& registry, const std::string& address, PageSource status_page = {},
                Limits limits = {});
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  const std::string& host() const;
  int port() const;
  // "http://HOST:PORT/metrics", for logs and tests.
  std::string url() const;
  // Whether the listening address is a loopback address (127.0.0.0/8, ::1).
  bool loopback_only() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::daemon

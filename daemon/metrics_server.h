// Serves a MetricsRegistry on GET /metrics over HTTP (cpp-httplib) for Prometheus to scrape, and an
// HTML status page (daemon/status_page.h) on GET / and GET /status when the daemon gives one.
// RAII: the constructor binds and starts serving, the destructor stops and joins.
//
// Threads: cpp-httplib's listener and a small worker pool; they only read the registry (which is
// thread-safe) and call the page source, and never touch ZeroMQ sockets or training state.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "daemon/metrics_registry.h"
#include "error/error.h"

namespace meridian::daemon {

class MetricsServerError : public error::UserError {
 public:
  using error::UserError::UserError;
};

class MetricsServer {
 public:
  // `address` is "HOST:PORT" ("[::1]:9400" for IPv6); port 0 picks a free port (see port()).
  // `registry` must outlive the server. Throws MetricsServerError naming the address when it is
  // malformed or cannot be bound (in use, not a local address).
  // `status_page` (called on the server's threads, so thread-safe; it must outlive the server) returns
  // the HTML of the status page; without one, GET / answers with a line of text.
  using PageSource = std::function<std::string()>;
  MetricsServer(const MetricsRegistry& registry, const std::string& address, PageSource status_page = {});
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  const std::string& host() const;
  int port() const;
  // "http://HOST:PORT/metrics", for logs and tests.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::daemon

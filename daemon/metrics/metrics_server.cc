#include "daemon/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;

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

// A descriptor closed by its owner's destructor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Binds and listens on the first address `host` resolves to; an invalid Fd when none can be bound.
Fd listen_on(const HostPort& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(where.port);
  if (::getaddrinfo(where.host.c_str(), service.c_str(), &hints, &found) != 0) return Fd();
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  for (const addrinfo* a = found; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) continue;
    // SO_REUSEADDR allows a restart while old connections sit in TIME_WAIT. Not SO_REUSEPORT: that
    // would let a second daemon bind the same port and take half of the scrapes.
    int yes = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 64) == 0) return fd;
  }
  return Fd();
}

std::string ip_text(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  else if (addr.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
  return text;
}

int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return 0;
}

bool is_loopback(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr) >> 24) == 127;
  if (addr.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}

// One accepted connection as httplib reads and writes it, with the server's bounds: every wait ends
// at the connection's deadline or when the server stops, and reading stops after `max_bytes`.
class BoundedStream final : public httplib::Stream {
 public:
  BoundedStream(int fd, int stop_fd, Clock::time_point deadline, std::size_t max_bytes)
      : fd_(fd), stop_fd_(stop_fd), deadline_(deadline), max_bytes_(max_bytes) {}

  bool is_readable() const override { return begin_ < end_ || wait_for(POLLIN); }
  bool is_writable() const override { return wait_for(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (read_so_far_ >= max_bytes_) {
        over_limit_ = true;
        return -1;
      }
      if (!wait_for(POLLIN)) return -1;
      const std::size_t room = std::min(buffer_.size(), max_bytes_ - read_so_far_);
      const ssize_t n = ::recv(fd_, buffer_.data(), room, 0);
      if (n <= 0) return n;
      read_so_far_ += static_cast<std::size_t>(n);
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(POLLOUT)) return -1;
    return ::send(fd_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    ip = ip_text(addr);
    port = port_of(addr);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    ip = ip_text(addr);
    port = port_of(addr);
  }
  socket_t socket() const override { return fd_; }

  bool timed_out() const { return timed_out_; }
  bool over_limit() const { return over_limit_; }

 private:
  // True when the socket is ready for `events` before the deadline and before the server stops.
  bool wait_for(short events) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) {
        timed_out_ = true;
        return false;
      }
      pollfd fds[2] = {{fd_, events, 0}, {stop_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
      if (ready < 0 && errno != EINTR) return false;
      if (ready <= 0) continue;
      if (fds[1].revents) return false;
      return fds[0].revents != 0;
    }
  }

  int fd_;
  int stop_fd_;
  Clock::time_point deadline_;
  std::size_t max_bytes_;
  std::size_t read_so_far_ = 0;
  std::array<char, 4096> buffer_{};
  std::size_t begin_ = 0, end_ = 0;
  mutable bool timed_out_ = false;
  bool over_limit_ = false;
};

// httplib's parser and router, run on a stream of ours: the server owns accepting, limits and deadlines.
class Router final : public httplib::Server {
 public:
  // Reads one request from `stream`, answers it and asks for the connection to close.
  void serve(httplib::Stream& stream) {
    bool closed = true;
    (void)process_request(stream, true, closed, nullptr);
  }
};

constexpr std::string_view kBusyResponse =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 45\r\nConnection: close\r\n\r\n"
    "the metrics server is busy; try again shortly\n";

}  // namespace

struct MetricsServer::Impl {
  const MetricsRegistry& registry;
  Limits limits;
  HostPort bound;
  bool loopback = false;
  Router router;
  // The server's own metrics, rendered after the registry's.
  MetricsRegistry own;
  Family<Counter>& refused = own.counter_family(
      "meridian_http_refused_total",
      "Requests to the metrics server refused, by cause: method (not GET or HEAD), body (a request body), "
      "too_large (request beyond the size limit), slow (not completed before the deadline), busy (every worker "
      "taken)",
      {"cause"});
  Fd listener;
  Fd stop_event{::eventfd(0, EFD_CLOEXEC)};

  std::mutex mutex;
  std::condition_variable work;
  std::deque<Fd> queue;
  std::size_t in_service = 0;  // queued and being served
  bool stopping = false;
  std::vector<std::thread> threads;

  Impl(const MetricsRegistry& r, Limits l) : registry(r), limits(l) {}

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{listener.get(), POLLIN, 0}, {stop_event.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (conn.get() < 0) {
        if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) return;  // the listener itself is broken
        // Out of descriptors, or the client gave up before the accept: try the next one a moment later.
        if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      std::unique_lock lock(mutex);
      if (in_service >= limits.workers) {
        lock.unlock();
        // Never blocks: the answer fits the new socket's empty buffer, or is dropped.
        (void)::send(conn.get(), kBusyResponse.data(), kBusyResponse.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        refused.with({"busy"}).inc();
        continue;
      }
      ++in_service;
      queue.push_back(std::move(conn));
      lock.unlock();
      work.notify_one();
    }
  }

  void work_loop() {
    for (;;) {
      Fd conn;
      {
        std::unique_lock lock(mutex);
        work.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        conn = std::move(queue.front());
        queue.pop_front();
      }
      BoundedStream stream(conn.get(), stop_event.get(), Clock::now() + limits.deadline, limits.max_request_bytes);
      try {
        router.serve(stream);
      } catch (const std::exception& e) {
        // httplib answers a handler's exception with 500 itself; this is anything else (memory).
        spdlog::warn("metrics server: a request failed: {}", e.what());
      }
      if (stream.timed_out()) refused.with({"slow"}).inc();
      if (stream.over_limit()) refused.with({"too_large"}).inc();
      ::shutdown(conn.get(), SHUT_RDWR);
      conn.reset();
      std::lock_guard lock(mutex);
      --in_service;
    }
  }
};

MetricsServer::MetricsServer(const MetricsRegistry& registry, const std::string& address, PageSource status_page,
                             Limits limits)
    : impl_(std::make_unique<Impl>(registry, limits)) {
  if (limits.workers == 0) throw error::InternalError("MetricsServer: at least one worker is needed");
  impl_->bound = parse_address(address);
  if (impl_->stop_event.get() < 0)
    throw MetricsServerError(std::string("metrics server: eventfd: ") + std::strerror(errno));
  auto& router = impl_->router;
  auto& refused = impl_->refused;
  // Whether to refuse a request, and the answer when so; run once the headers are read and before any
  // body is, so refusing never reads a body.
  const auto refuse = [&refused](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      refused.with({"method"}).inc();
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      res.set_content("only GET and HEAD are served here\n", "text/plain");
      return true;
    }
    if (req.has_header("Transfer-Encoding") ||
        (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")) {
      refused.with({"body"}).inc();
      res.status = 413;
      res.set_content("requests here carry no body\n", "text/plain");
      return true;
    }
    return false;
  };
  router.set_pre_routing_handler([refuse](const httplib::Request& req, httplib::Response& res) {
    return refuse(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before sending its body (Expect: 100-continue) gets the refusal instead of a
  // go-ahead.
  router.set_expect_100_continue_handler(
      [refuse](const httplib::Request& req, httplib::Response& res) { return refuse(req, res) ? res.status : 100; });
  router.set_payload_max_length(limits.max_request_bytes);
  router.Get("/metrics", [impl = impl_.get()](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->registry.render() + impl->own.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (status_page) {
    const auto page = [status_page](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(status_page(), "text/html; charset=utf-8");
    };
    router.Get("/", page);
    router.Get("/status", page);
  } else {
    router.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("Meridian daemon: metrics are at /metrics\n", "text/plain");
    });
  }

  impl_->listener = listen_on(impl_->bound);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (impl_->listener.get() < 0 ||
      ::getsockname(impl_->listener.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    throw MetricsServerError("metrics address '" + address +
                             "': cannot listen there (port in use, or not an address of this machine); "
                             "choose another with --metrics-address, or 'off'");
  }
  impl_->bound.port = port_of(local);
  impl_->loopback = is_loopback(local);
  if (!impl_->loopback) {
    spdlog::warn(
        "metrics and status page on {}:{} are not limited to this machine: anyone who can reach that address "
        "can read them (training progress, peers, their addresses). Bind 127.0.0.1 (--metrics-address "
        "127.0.0.1:{}) and scrape through a local agent or an SSH tunnel, or restrict the port with a firewall",
        impl_->bound.host, impl_->bound.port, impl_->bound.port);
  }
  impl_->threads.emplace_back([impl = impl_.get()] { impl->accept_loop(); });
  for (std::size_t i = 0; i < limits.workers; ++i)
    impl_->threads.emplace_back([impl = impl_.get()] { impl->work_loop(); });
}

MetricsServer::~MetricsServer() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(impl_->stop_event.get(), &one, sizeof one);
  impl_->work.notify_all();
  for (auto& t : impl_->threads) t.join();
}

const std::string& MetricsServer::host() const { return impl_->bound.host; }
int MetricsServer::port() const { return impl_->bound.port; }
bool MetricsServer::loopback_only() const { return impl_->loopback; }

std::string MetricsServer::url() const {
  const bool v6 = impl_->bound.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + impl_->bound.host + "]" : impl_->bound.host) + ":" +
         std::to_string(impl_->bound.port) + "/metrics";
}

}  // namespace meridian::daemon

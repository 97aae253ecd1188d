#include "daemon/control/shutdown_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace meridian::daemon {
namespace {

std::atomic<int> g_requests{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free counter");

extern "C" void on_stop_signal(int) {
  if (g_requests.fetch_add(1) >= 1) {
    // Second signal: the operator wants out now (no checkpoint, no leave).
    static const char msg[] = "\nmeridian: second signal, exiting at once\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(130);
  }
}

}  // namespace

void ShutdownSignals::install() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool ShutdownSignals::requested() { return g_requests.load() > 0; }

void ShutdownSignals::request() {
  int expected = 0;
  g_requests.compare_exchange_strong(expected, 1);
}

}  // namespace meridian::daemon

#include "daemon/control/reload_signal.h"

#include <signal.h>

#include <atomic>

namespace meridian::daemon {
namespace {

std::atomic<bool> g_reload{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_reload_signal(int) { g_reload.store(true); }

}  // namespace

void ReloadSignal::install() {
  struct sigaction sa {};
  sa.sa_handler = on_reload_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGHUP, &sa, nullptr);
}

bool ReloadSignal::take() { return g_reload.exchange(false); }

}  // namespace meridian::daemon

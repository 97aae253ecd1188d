#include "cli/interrupt_flag.h"

#include <atomic>
#include <stdexcept>

#include "error/error.h"

namespace meridian::cli {
namespace {

// Only lock-free atomics may be touched from a signal handler.
std::atomic<int> signals_received{0};
std::atomic<int> last_signal_received{0};
std::atomic<bool> installed{false};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void count_signal(int signal) {
  signals_received.fetch_add(1);
  last_signal_received.store(signal);
}

}  // namespace

InterruptFlag::InterruptFlag() {
  if (installed.exchange(true)) throw error::InternalError("InterruptFlag: only one may exist at a time");
  signals_received = 0;
  last_signal_received = 0;
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking call returns EINTR so the loop notices the signal at once.
  action.sa_flags = 0;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

InterruptFlag::~InterruptFlag() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  installed = false;
}

int InterruptFlag::count() const { return signals_received.load(); }
int InterruptFlag::last_signal() const { return last_signal_received.load(); }

}  // namespace meridian::cli

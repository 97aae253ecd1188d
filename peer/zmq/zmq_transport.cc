// The ZeroMQ transport's public side: option checks, the I/O thread, and who runs the loop — the I/O
// thread, or for a short lease a caller of send() or receive() (see Threads in peer/zmq/zmq_transport.h).
// Everything the loop does is in peer/zmq/zmq_io_loop.h and the files it lists.
#include "peer/zmq/zmq_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "error/error.h"
#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ZmqTransport::ZmqTransport(ZmqTransportOptions options) : options_(std::move(options)), pool_(options_.pooled_buffers) {
  if (!is_valid_site_name(options_.name))
    throw error::UserError("site name '" + options_.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  if (options_.heartbeat_interval.count() <= 0 || options_.heartbeat_timeout <= options_.heartbeat_interval)
    throw error::UserError("heartbeat timeout (" + std::to_string(options_.heartbeat_timeout.count()) +
                           " ms) must exceed the heartbeat interval (" +
                           std::to_string(options_.heartbeat_interval.count()) + " ms), which must be positive");
  if (options_.io_threads < 1)
    throw error::UserError("io_threads (" + std::to_string(options_.io_threads) + ") must be at least 1");
  if (options_.socket_buffer_bytes < 0)
    throw error::UserError("socket buffer size (" + std::to_string(options_.socket_buffer_bytes) +
                           " bytes) must be positive, or 0 for the OS default");
  if (!(std::isfinite(options_.max_send_bits_per_s) && options_.max_send_bits_per_s >= 0))
    throw error::UserError("the send rate cap must be a rate in bits per second, or 0 for none");
  if (options_.insecure) {
    spdlog::warn(
        "*** INSECURE: site '{}' uses plain TCP: no encryption, no authentication; anyone who can reach "
        "{} can read the model and inject messages. Use only for local experiments. ***",
        options_.name, options_.listen);
  } else {
    if (!options_.keys) throw error::UserError("secure mode needs the site's key pair (see 'meridian keygen')");
    if (!options_.roster) throw error::UserError("secure mode needs a roster file");
    const auto* me = options_.roster->by_name(options_.name);
    if (!me) throw error::UserError("site '" + options_.name + "' is not in the roster");
    if (me->public_key != options_.keys->public_key)
      throw error::UserError("the roster lists another public key for site '" + options_.name +
                             "' than this site's key pair");
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw TransportError("cannot create an eventfd for the transport's I/O thread");
  try {
    loop_ = std::make_unique<IoLoop>(*this);
  } catch (...) {
    ::close(wake_fd_);
    throw;
  }
  caller_driven_ = !options_.wan.emulates();
  thread_ = std::thread([this] {
    try {
      std::unique_lock loop_lock(loop_mu_);
      while (!loop_->stopping() && !broken_) {
        // A caller that sends and receives runs the loop itself: stay out of its way while one waits for
        // the loop or its lease lasts (this thread holds loop_mu_ except while parked here).
        const auto until = lease_until();
        if (callers_waiting_ > 0 || Clock::now() < until) {
          loop_cv_.wait_until(loop_lock, std::max(until, Clock::now() + kCallerLease));
          continue;
        }
        loop_->step(Clock::time_point::max());
      }
      if (!broken_) loop_->publish();
    } catch (const std::exception& e) {
      spdlog::error("transport I/O thread of '{}' failed: {}", options_.name, e.what());
      std::lock_guard lock(mu_);
      failure_ = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    arrived_.notify_all();
  });
}

ZmqTransport::~ZmqTransport() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      commands_.push_back(Command{Command::Type::kStop, {}, {}, 0});
    }
    wake_io_thread();
    thread_.join();
  }
  loop_.reset();
  ::close(wake_fd_);
}

void ZmqTransport::rethrow_if_failed() const {
  if (failure_) {
    try {
      std::rethrow_exception(failure_);
    } catch (const std::exception& e) {
      throw TransportError(std::string("transport of '") + options_.name + "' failed: " + e.what());
    }
  }
  if (stopped_) throw TransportError("transport of '" + options_.name + "' is closed");
}

std::chrono::steady_clock::time_point ZmqTransport::lease_until() const {
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(lease_until_.load()));
}

void ZmqTransport::extend_lease() {
  lease_until_.store((std::chrono::steady_clock::now() + kCallerLease).time_since_epoch().count());
}

void ZmqTransport::wake_io_thread() {
  // Ends the lease and interrupts whoever polls, so that stop and leave commands are handled at once.
  lease_until_.store(0);
  loop_cv_.notify_all();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ZmqTransport::loop_failed() {
  {
    std::lock_guard lock(mu_);
    failure_ = std::current_exception();
  }
  broken_ = true;
  lease_until_.store(0);
  loop_cv_.notify_all();
  arrived_.notify_all();
}

bool ZmqTransport::take_loop(std::unique_lock<std::mutex>& loop_lock) {
  if (!caller_driven_ || broken_) return false;
  extend_lease();
  if (!loop_lock.try_lock()) {
    // Another caller runs the loop and delivers for us; or the I/O thread polls: interrupt it, it then
    // parks for the lease and hands over the sockets with the mutex (a full memory barrier, which is
    // what libzmq asks for when a socket moves between threads).
    if (caller_in_loop_) return false;
    ++callers_waiting_;
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
    loop_lock.lock();
    --callers_waiting_;
  }
  // After leave() there is no loop left to run: the caller then finds the transport closed.
  if (!loop_ || loop_->stopping() || broken_) {
    loop_lock.unlock();
    return false;
  }
  caller_in_loop_ = true;
  return true;
}

void ZmqTransport::post(Command cmd) {
  {
    std::lock_guard lock(mu_);
    rethrow_if_failed();
    commands_.push_back(std::move(cmd));
  }
  // Nobody polls (the I/O thread is parked for a caller's lease): hand the command to libzmq here,
  // which saves waking a thread per message. Otherwise wake the poller.
  std::unique_lock loop_lock(loop_mu_, std::try_to_lock);
  if (caller_driven_ && loop_lock.owns_lock() && !loop_->stopping() && !broken_) {
    extend_lease();
    try {
      loop_->pump();
    } catch (const std::exception&) {
      loop_failed();
      std::lock_guard lock(mu_);
      rethrow_if_failed();
    }
    return;
  }
  if (loop_lock.owns_lock()) loop_lock.unlock();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void ZmqTransport::set_roster(const Roster& roster) {
  if (options_.insecure) FederationTransport::set_roster(roster);
  const auto* me = roster.by_name(options_.name);
  if (!me) throw error::UserError("the new roster does not list this site ('" + options_.name + "')");
  if (me->public_key != options_.keys->public_key)
    throw error::UserError("the new roster lists another public key for this site ('" + options_.name +
                           "') than its key pair");
  post(Command{Command::Type::kSetRoster, {}, {}, 0, std::make_shared<const Roster>(roster)});
}

void ZmqTransport::send(const std::string& to, Message msg) {
  post(Command{Command::Type::kSend, to, std::move(msg), 0});
}

std::optional<Received> ZmqTransport::take_from(std::deque<Message>& box, std::chrono::milliseconds timeout,
                                                const PayloadSink* sink) {
  const auto deadline = Clock::now() + timeout;
  auto pop = [&]() -> std::optional<Message> {
    if (box.empty()) return std::nullopt;
    Message m = std::move(box.front());
    box.pop_front();
    return m;
  };
  // A message that came through the inbox carries its payload: apply it to the sink from there.
  auto hand_out = [&](Message m) -> Received {
    return sink ? sink_received(*sink, std::move(m)) : Received{std::move(m), false};
  };
  {
    std::unique_lock lock(mu_);
    if (auto m = pop()) {
      lock.unlock();
      return hand_out(std::move(*m));
    }
  }
  std::unique_lock loop_lock(loop_mu_, std::defer_lock);
  if (take_loop(loop_lock)) {
    std::optional<Message> got, sunk;
    bool stopping = false;
    loop_->set_sink(sink);
    try {
      // At least one turn, even past the deadline, so that mail already in libzmq is not reported missing.
      for (bool first = true;; first = false) {
        {
          std::lock_guard lock(mu_);
          if ((got = pop())) break;
        }
        if ((sunk = loop_->take_sunk())) break;
        stopping = loop_->stopping();
        if (stopping || (!first && Clock::now() >= deadline)) break;
        loop_->step(std::min(deadline, Clock::now() + kCallerSlice), true);
      }
    } catch (const std::exception&) {
      loop_failed();
    }
    loop_->set_sink(nullptr);
    caller_in_loop_ = false;
    extend_lease();
    loop_lock.unlock();
    if (stopping) wake_io_thread();  // a stop or leave ran here: let the I/O thread finish
    if (sunk) return Received{std::move(*sunk), true};
    if (got) return hand_out(std::move(*got));
  }
  std::unique_lock lock(mu_);
  arrived_.wait_until(lock, deadline, [&] { return !box.empty() || stopped_ || failure_; });
  if (auto m = pop()) {
    lock.unlock();
    return hand_out(std::move(*m));
  }
  rethrow_if_failed();
  return std::nullopt;
}

std::optional<Message> ZmqTransport::receive(std::chrono::milliseconds timeout) {
  auto got = take_from(inbox_, timeout, nullptr);
  if (!got) return std::nullopt;
  return std::move(got->msg);
}

std::optional<Received> ZmqTransport::receive_into(const PayloadSink& sink, std::chrono::milliseconds timeout) {
  return take_from(inbox_, timeout, &sink);
}

std::optional<Message> ZmqTransport::receive_control(std::chrono::milliseconds timeout) {
  auto got = take_from(control_inbox_, timeout, nullptr);
  if (!got) return std::nullopt;
  return std::move(got->msg);
}

View ZmqTransport::view_for(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  const View* best = &views_.front();
  for (const auto& v : views_)
    if (v.effective_round <= round) best = &v;
  return *best;
}

View ZmqTransport::latest_view() const {
  std::lock_guard lock(mu_);
  return views_.back();
}

std::optional<View> ZmqTransport::view_awaited(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  return Membership::view_awaited(views_held_, views_, round);
}

bool ZmqTransport::awaits_pace() const {
  std::lock_guard lock(mu_);
  return awaits_pace_;
}

void ZmqTransport::set_round(std::uint64_t round) { post(Command{Command::Type::kSetRound, {}, {}, round}); }

void ZmqTransport::start_partition_clock() {
  if (options_.partition_clock_deferred) post(Command{Command::Type::kStartPartitionClock, {}, {}, 0});
}

void ZmqTransport::resume_round(std::uint64_t round) { post(Command{Command::Type::kResumeRound, {}, {}, round}); }

void ZmqTransport::set_step_time(std::chrono::microseconds step) {
  post(Command{
      Command::Type::kSetStepTime, {}, {}, static_cast<std::uint64_t>(std::max<std::int64_t>(0, step.count()))});
}

void ZmqTransport::leave(std::chrono::milliseconds linger) {
  if (!thread_.joinable()) return;
  post(Command{Command::Type::kLeave, {}, {}, static_cast<std::uint64_t>(linger.count())});
  wake_io_thread();
  thread_.join();
  std::lock_guard loop_lock(loop_mu_);
  loop_.reset();  // closes the sockets; their linger lets the leave reach the peers
}

std::vector<MemberStatus> ZmqTransport::members() const {
  std::lock_guard lock(mu_);
  return member_status_;
}

std::vector<std::string> ZmqTransport::alive_members() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& m : member_status_)
    if (m.record.state == MemberState::kAlive) out.push_back(m.record.name);
  return out;
}

TransportStats ZmqTransport::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::optional<std::string> ZmqTransport::refusal() const {
  std::lock_guard lock(mu_);
  return refusal_;
}

std::vector<std::string> ZmqTransport::refused_by() const {
  std::lock_guard lock(mu_);
  return refused_by_;
}

std::vector<std::string> ZmqTransport::join_problems() const {
  std::lock_guard lock(mu_);
  return join_problems_;
}

}  // namespace meridian::peer

// One turn of the ZeroMQ transport's loop: timers (membership), due sends, polling the sockets and
// the wake-up eventfd, and handling what is ready; commands posted by other threads; and publishing
// views, member status and counters for them.
#include <unistd.h>

#include <algorithm>

#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

void ZmqTransport::IoLoop::advance_round(std::uint64_t round, bool own) {
  if (driver_->note_round(round, own)) validator_.advance_round(round);
}

void ZmqTransport::IoLoop::drain_commands() {
  std::uint64_t ignored;
  [[maybe_unused]] auto n = ::read(t_.wake_fd_, &ignored, sizeof ignored);
  std::deque<Command> commands;
  {
    std::lock_guard lock(t_.mu_);
    commands.swap(t_.commands_);
  }
  for (auto& cmd : commands) {
    switch (cmd.type) {
      case Command::Type::kSend: handle_send(std::move(cmd.to), std::move(cmd.msg)); break;
      case Command::Type::kSetRound: advance_round(cmd.round); break;
      case Command::Type::kResumeRound: advance_round(cmd.round, false); break;
      case Command::Type::kSetStepTime: driver_->set_step_time(std::chrono::microseconds(cmd.round)); break;
      case Command::Type::kStartPartitionClock:
        if (!partition_origin_) partition_origin_ = Clock::now();
        break;
      case Command::Type::kLeave: handle_leave(std::chrono::milliseconds(cmd.round)); return;
      case Command::Type::kStop: stop_ = true; return;
      case Command::Type::kSetRoster: replace_roster(*cmd.roster); break;
    }
  }
}

void ZmqTransport::IoLoop::deliver(Message&& msg) {
  delivered_ = true;
  {
    std::lock_guard lock(t_.mu_);
    (msg.kind == MessageKind::kControl ? t_.control_inbox_ : t_.inbox_).push_back(std::move(msg));
  }
  t_.arrived_.notify_all();
}

void ZmqTransport::IoLoop::publish() {
  if (!dirty_) return;
  dirty_ = false;
  std::vector<MemberStatus> status;
  for (const auto& r : membership().records()) {
    MemberStatus m{r, links_.contains(r.name), driver_->rtt(r.name), 0, 0, membership().last_heard(r.name)};
    if (auto it = traffic_.find(r.name); it != traffic_.end()) {
      m.bytes_in = it->second.in;
      m.bytes_out = it->second.out;
    }
    status.push_back(std::move(m));
  }
  std::vector<std::string> problems, refused_by;
  for (const auto& b : bootstraps_) {
    if (!b.problem.empty()) problems.push_back(b.problem);
    if (b.key_refused && !b.name.empty()) refused_by.push_back(b.name);
  }
  std::sort(refused_by.begin(), refused_by.end());
  // A view of this site's that a member does not take (its roster lacks a joiner, it still hears a
  // site the view drops) holds the start up as much as an unreachable bootstrap site does.
  if (auto pending = membership().pending_view_note()) problems.push_back(std::move(*pending));
  std::lock_guard lock(t_.mu_);
  t_.join_problems_ = std::move(problems);
  t_.refused_by_ = std::move(refused_by);
  t_.views_ = membership().views_in_force();
  t_.views_held_ = membership().views();
  t_.awaits_pace_ = membership().awaits_pace();
  t_.member_status_ = std::move(status);
  t_.stats_ = stats_;
  if (zap_) {
    t_.stats_.zap_admitted = zap_->admitted();
    t_.stats_.zap_denied = zap_->denied();
  }
}

void ZmqTransport::IoLoop::pump() {
  drain_commands();
  if (stop_) return;
  flush(Clock::now());
  publish();
}

void ZmqTransport::IoLoop::step(Clock::time_point wake_by, bool until_delivery) {
  delivered_ = false;
  auto now = Clock::now();
  driver_->on_timer(now);
  flush(now);
  publish();

  // Sleep until the membership's next timer, the next due message, `wake_by`, or something to read or
  // write.
  Clock::time_point deadline = std::min(driver_->next_due(), wake_by);
  items_.clear();
  items_.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
  items_.push_back({nullptr, t_.wake_fd_, ZMQ_POLLIN, 0});
  if (zap_) items_.push_back({zap_->socket().handle(), 0, ZMQ_POLLIN, 0});
  // Woken by a connection the listener accepts, to read its peer's address while it is still open
  // (read_connection_events).
  if (listener_monitor_) items_.push_back({listener_monitor_->socket().handle(), 0, ZMQ_POLLIN, 0});
  for (auto& [name, link] : links_) {
    if (link.blocked) items_.push_back({link.dealer.handle(), 0, ZMQ_POLLOUT, 0});
    else if (!link.queue.empty()) deadline = std::min(deadline, next_send_time(link));
  }
  now = Clock::now();
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
  if (wait.count() < 0) wait = std::chrono::milliseconds(0);
  // A signal (the daemon handles SIGINT/SIGTERM) interrupts the poll: just go round again.
  if (zmq_poll(items_.data(), static_cast<int>(items_.size()), static_cast<long>(wait.count())) < 0) {
    if (zmq_errno() == EINTR) return;
    throw zmq::error_t();
  }

  if (items_[1].revents & ZMQ_POLLIN) drain_commands();
  if (stop_) return;
  read_connection_events();
  if (zap_ && (items_[2].revents & ZMQ_POLLIN)) {
    zap_->handle();
    dirty_ = true;
  }
  if (items_[0].revents & ZMQ_POLLIN) {
    // Bounded so that commands, heartbeats and the ZAP handler are not starved by a flood.
    for (int i = 0; i < 256 && !(until_delivery && delivered_) && receive_one(); ++i) {
    }
  }
}

}  // namespace meridian::peer

#include "peer/in_memory_federation.h"

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "error/error.h"
#include "peer/finite_copy.h"
#include "peer/opaque_payload.h"
#include "peer/printable_text.h"
#include "peer/roster.h"
#include "peer/wire_codec.h"

namespace meridian::peer {

namespace {

std::uint64_t wall_clock_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::uint64_t message_bytes(const Message& m) { return m.body.size() + m.payload.size() * sizeof(float); }

}  // namespace

InMemoryFederation::InMemoryFederation(std::shared_ptr<InMemoryNetwork> network, InMemoryFederationOptions options)
    : net_(std::move(network)),
      options_(std::move(options)),
      endpoint_("tcp://" + options_.name + ".in-memory.invalid:1"),
      validator_(options_.validation) {
  // The same checks and messages as ZmqTransport's, so that a site configuration behaves alike on both.
  if (!is_valid_site_name(options_.name))
    throw error::UserError("site name '" + options_.name + "' must be 1-64 letters, digits, '.', '_' or '-'");
  if (options_.heartbeat_interval.count() <= 0 || options_.heartbeat_timeout <= options_.heartbeat_interval)
    throw error::UserError("heartbeat timeout (" + std::to_string(options_.heartbeat_timeout.count()) +
                           " ms) must exceed the heartbeat interval (" +
                           std::to_string(options_.heartbeat_interval.count()) + " ms), which must be positive");
  for (const auto& b : options_.bootstrap)
    if (b != options_.name) bootstraps_.push_back(b);
  driver_.emplace(
      MembershipConfig{options_.name, endpoint_, options_.region,
                       options_.incarnation ? options_.incarnation : wall_clock_ms(), options_.heartbeat_timeout,
                       options_.view_lead_rounds, is_valid_site_name, options_.terms, options_.agree_pace,
                       options_.hearsay_view_interval},
      MembershipTiming{options_.heartbeat_interval, options_.heartbeat_timeout, options_.heartbeat_deadline}, static_cast<MembershipPort&>(*this),
      Clock::now());
  net_->attach(options_.name);
  thread_ = std::thread([this] { run(); });
}

InMemoryFederation::~InMemoryFederation() {
  stop_thread();
  std::lock_guard lock(mu_);
  if (!stopped_) net_->detach(options_.name);
}

void InMemoryFederation::stop_thread() {
  if (!thread_.joinable()) return;
  stop_thread_ = true;
  net_->interrupt();
  thread_.join();
}

void InMemoryFederation::run() {
  while (!stop_thread_) {
    Clock::time_point due;
    {
      std::lock_guard lock(mu_);
      driver_->on_timer(Clock::now());
      due = driver_->next_due();
    }
    auto envelope = net_->take_until(options_.name, due, stop_thread_);
    if (!envelope) continue;
    std::lock_guard lock(mu_);
    handle(std::move(envelope->msg), envelope->model_fingerprint, Clock::now());
  }
}

std::optional<Rejection> InMemoryFederation::validate(const std::string& from, const Message& msg,
                                                      std::uint64_t model_fingerprint) const {
  // The header ZmqTransport would decode for this message sent whole: its one chunk holds the payload.
  WireHeader h;
  h.protocol_version = kProtocolVersion;
  h.model_fingerprint = model_fingerprint;
  h.kind = msg.kind;
  h.chunk_elements = msg.payload.size();
  h.payload_elements = msg.payload.size();
  h.view_id = msg.view_id;
  h.round = msg.round;
  h.tag = msg.tag;
  h.phase = msg.phase;
  h.offset = msg.offset;
  h.total = msg.total;
  h.weight = msg.weight;
  if (auto r = validator_.check(from, h)) return r;
  // The reassembler's pass over a mixer payload on TCP; an opaque one holds bytes, not floats.
  if (is_mixer_kind(msg.kind) && !has_opaque_payload(msg.kind, msg.phase) &&
      !all_finite(reinterpret_cast<const std::byte*>(msg.payload.data()), msg.payload.size()))
    return Rejection{RejectCause::kNonFinite, "NaN or infinity in the payload"};
  return std::nullopt;
}

void InMemoryFederation::handle(Message msg, std::uint64_t model_fingerprint, Clock::time_point now) {
  // The network set msg.from to the true sender, as an authenticated connection names it on TCP.
  const std::string from = msg.from;
  auto refuse = [&](const Rejection& r) { rejections_.record(r.cause, from, r.detail); };
  std::optional<Rejection> refused;
  switch (msg.kind) {
    case MessageKind::kHello: {
      auto decoded = decode_hello(msg.body);
      if (auto* r = std::get_if<Rejection>(&decoded)) {
        refuse(*r);
        return;
      }
      const auto* hello = &std::get<HelloInfo>(decoded);
      if (hello->name != from) {
        refuse({RejectCause::kUnknownSender, "hello claims the name '" + hello->name + "'"});
        return;
      }
      // Terms as on TCP (peer/zmq/zmq_frame_receiver.cc): a refusal is kept for refusal(), a peer with
      // other terms is refused before it can become a member.
      if (!hello->refusal.empty()) {
        // Only a site this one joins through decides that it is not admitted.
        if (std::find(options_.bootstrap.begin(), options_.bootstrap.end(), from) == options_.bootstrap.end()) {
          refuse({RejectCause::kStrayRefusal, "refuses this site, which does not join through it"});
          return;
        }
        if (!refusal_) {
          refusal_ = printable_text(hello->refusal, kMaxPeerTextBytes);
          spdlog::error("'{}': {}", options_.name, *refusal_);
        }
        return;
      }
      if (!options_.terms.empty()) {
        if (auto mismatch = compare_terms(options_.terms, hello->terms)) {
          refuse_terms(from, *mismatch);
          return;
        }
      }
      // As on TCP, terms come before the validator's fingerprint check: a site with another model hears
      // which model differs, not a hash.
      refused = validate(from, msg, model_fingerprint);
      if (!refused) refused = driver_->on_hello(*hello, now);
      break;
    }
    case MessageKind::kMembers:
    case MessageKind::kHeartbeat:
    case MessageKind::kLeave:
      refused = validate(from, msg, model_fingerprint);
      if (!refused) refused = driver_->on_message(from, msg.kind, msg.body, now);
      break;
    case MessageKind::kControl:
    case MessageKind::kPushSum:
    case MessageKind::kReduceChunk:
    case MessageKind::kGroupChunk:
    case MessageKind::kCompressedShare:
      refused = validate(from, msg, model_fingerprint);
      if (!refused) refused = driver_->admit(from, msg.kind, now);
      break;
  }
  if (refused) {
    refuse(*refused);
    return;
  }
  validator_.accept(from, msg);
  ++stats_.messages_received;
  stats_.bytes_received += message_bytes(msg);
  traffic_[from].in += message_bytes(msg);
  if (msg.kind == MessageKind::kControl || is_mixer_kind(msg.kind)) deliver_locally(std::move(msg));
}

void InMemoryFederation::deliver_locally(Message msg) {
  (msg.kind == MessageKind::kControl ? control_inbox_ : inbox_).push_back(std::move(msg));
  arrived_.notify_all();
}

void InMemoryFederation::refuse_terms(const std::string& from, const TermsMismatch& mismatch) {
  rejections_.record(RejectCause::kTerms, from, refusal_log_detail(from, mismatch));
  HelloInfo answer = driver_->membership().hello();
  answer.refusal = refusal_reason(options_.name, mismatch);
  Message m;
  m.kind = MessageKind::kHello;
  m.body = encode_hello(answer);
  post(from, std::move(m));
}

void InMemoryFederation::post(const std::string& to, Message msg) {
  const auto bytes = message_bytes(msg);
  ++stats_.messages_sent;
  stats_.bytes_sent += bytes;
  traffic_[to].out += bytes;
  contacted_.insert(to);
  net_->deliver(options_.name, to, std::move(msg), options_.validation.model_fingerprint);
}

void InMemoryFederation::send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point) {
  // Like a ZeroMQ link: only to a site with a record, never to itself.
  if (to == options_.name || !driver_->membership().find(to)) return;
  Message m;
  m.kind = kind;
  m.body = std::move(body);
  post(to, std::move(m));
}

void InMemoryFederation::member_gone(const std::string& name, bool died) {
  contacted_.erase(name);
  // One that left keeps its replay records for the messages still on their way (MembershipDriver::admit).
  if (died) validator_.forget(name);
}

void InMemoryFederation::adopt_bootstraps() {
  std::erase_if(bootstraps_, [&](const std::string& b) { return driver_->membership().is_alive(b); });
}

void InMemoryFederation::greet_bootstraps(const std::string& hello, Clock::time_point) {
  for (const auto& b : bootstraps_) {
    Message m;
    m.kind = MessageKind::kHello;
    m.body = hello;
    post(b, std::move(m));
  }
}

void InMemoryFederation::throw_if_stopped() const {
  if (stopped_) throw TransportError("transport of '" + options_.name + "' is closed");
}

void InMemoryFederation::note_round(std::uint64_t round, bool own) {
  std::lock_guard lock(mu_);
  throw_if_stopped();
  if (driver_->note_round(round, own)) validator_.advance_round(round);
}

void InMemoryFederation::send(const std::string& to, Message msg) {
  std::lock_guard lock(mu_);
  throw_if_stopped();
  if (is_mixer_kind(msg.kind) && driver_->note_round(msg.round, true)) validator_.advance_round(msg.round);
  msg.from = options_.name;
  if (to == options_.name) {
    deliver_locally(std::move(msg));
    return;
  }
  // As on TCP (peer/zmq/zmq_outbound_links.cc): a member only heard of may be in a view already, and what
  // the view's rounds send it is delivered, not lost; only a member found dead or gone is unreachable.
  if (!driver_->membership().is_alive(to) && !driver_->membership().only_heard_of(to)) {
    ++stats_.dropped_unreachable;
    return;
  }
  post(to, std::move(msg));
}

std::optional<Message> InMemoryFederation::take(std::deque<Message>& box, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  arrived_.wait_for(lock, timeout, [&] { return !box.empty() || stopped_; });
  if (box.empty()) {
    throw_if_stopped();
    return std::nullopt;
  }
  Message m = std::move(box.front());
  box.pop_front();
  return m;
}

std::optional<Message> InMemoryFederation::receive(std::chrono::milliseconds timeout) { return take(inbox_, timeout); }

std::optional<Message> InMemoryFederation::receive_control(std::chrono::milliseconds timeout) {
  return take(control_inbox_, timeout);
}

View InMemoryFederation::view_for(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  const auto& views = driver_->membership().views_in_force();
  const View* best = &views.front();
  for (const auto& v : views)
    if (v.effective_round <= round) best = &v;
  return *best;
}

View InMemoryFederation::latest_view() const {
  std::lock_guard lock(mu_);
  return driver_->membership().views_in_force().back();
}

std::optional<View> InMemoryFederation::view_awaited(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  return driver_->membership().view_awaited(round);
}

bool InMemoryFederation::awaits_pace() const {
  std::lock_guard lock(mu_);
  return driver_->membership().awaits_pace();
}

void InMemoryFederation::set_round(std::uint64_t round) { note_round(round, true); }

void InMemoryFederation::resume_round(std::uint64_t round) { note_round(round, false); }

void InMemoryFederation::set_step_time(std::chrono::microseconds step) {
  std::lock_guard lock(mu_);
  throw_if_stopped();
  driver_->set_step_time(std::max(step, std::chrono::microseconds(0)));
}

void InMemoryFederation::leave(std::chrono::milliseconds) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    driver_->leave(Clock::now());
    stopped_ = true;
    spdlog::info("'{}' left the federation", options_.name);
  }
  arrived_.notify_all();
  stop_thread();
  net_->detach(options_.name);
}

std::vector<MemberStatus> InMemoryFederation::members() const {
  std::lock_guard lock(mu_);
  std::vector<MemberStatus> out;
  for (const auto& r : driver_->membership().records()) {
    MemberStatus m{
        r, contacted_.contains(r.name), driver_->rtt(r.name), 0, 0, driver_->membership().last_heard(r.name)};
    if (auto it = traffic_.find(r.name); it != traffic_.end()) {
      m.bytes_out = it->second.out;
      m.bytes_in = it->second.in;
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> InMemoryFederation::alive_members() const {
  std::lock_guard lock(mu_);
  return driver_->membership().alive_names();
}

TransportStats InMemoryFederation::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::optional<std::string> InMemoryFederation::refusal() const {
  std::lock_guard lock(mu_);
  return refusal_;
}

}  // namespace meridian::peer

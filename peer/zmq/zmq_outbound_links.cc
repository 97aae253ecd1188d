// Outbound links of the ZeroMQ transport: one DEALER per peer, opened on first use with a hello, and
// a FIFO queue of encoded chunks per link that flush() hands to libzmq once the (emulated) link
// delivers them and the send rate cap (peer/send_rate_limit.h) lets them go. Payloads leave without a
// copy: libzmq sends straight from the message's buffer.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

namespace {

// A sent payload shared by the zero-copy frames of its chunks. libzmq calls release_payload() from its
// own I/O thread when it is done with a frame; the last one hands the buffer back to the pool. The
// holder's lifetime is managed by this reference count because libzmq's C callback is the only
// owner that knows when the bytes are gone.
struct SentPayload {
  SentPayload(std::vector<float> d, BufferPool* p, std::size_t r) : data(std::move(d)), pool(p), refs(r) {}
  std::vector<float> data;
  BufferPool* pool;
  std::atomic<std::size_t> refs;
};

void release_payload(void* /*data*/, void* hint) {
  auto* holder = static_cast<SentPayload*>(hint);
  if (holder->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::unique_ptr<SentPayload> owned(holder);
  owned->pool->give(std::move(owned->data));
}

}  // namespace

Link* ZmqTransport::IoLoop::ensure_link(const std::string& name) {
  if (auto it = links_.find(name); it != links_.end()) return &it->second;
  const auto* record = membership().find(name);
  if (!record || record->address.empty() || name == opt_.name) return nullptr;
  if (secure() && !opt_.roster->by_name(name)) return nullptr;
  // Across an emulated partition the new connection's hello would be lost, and everything sent on it
  // later refused as coming from a connection that never said hello: connect once the cut heals.
  if (cut_off(name, Clock::now())) return nullptr;
  const std::string& address = dial_address(name, record->address);
  auto dealer = open_dealer(address, name);
  if (!dealer) return nullptr;
  auto [it, inserted] = links_.emplace(name, Link{address, std::move(*dealer), {}, false});
  dirty_ = true;
  // Every connection starts with a hello, so the other side can name it (insecure mode) and learns us.
  enqueue_membership(it->second, name, MessageKind::kHello, encode_hello(membership().hello()), Clock::now());
  return &it->second;
}

void ZmqTransport::IoLoop::close_link(const std::string& name) {
  auto it = links_.find(name);
  if (it == links_.end()) return;
  stats_.dropped_unreachable += it->second.queue.size();
  links_.erase(it);
  dirty_ = true;
}

void ZmqTransport::IoLoop::enqueue(Link& link, const std::string& to, Message&& msg, Clock::time_point now) {
  auto chunks = encode_message(msg, opt_.validation.model_fingerprint, next_message_id_++, opt_.limits);
  std::size_t with_payload = 0, bytes = 0;
  for (const auto& c : chunks) {
    with_payload += c.elements > 0;
    bytes += c.header.size() + c.elements * sizeof(float);
  }
  // The whole message is one unit on the emulated link: its chunks leave together when it is delivered.
  const auto delivered = due_time(to, msg.kind, bytes, now);
  if (!delivered) {
    ++stats_.emulated_lost;
    dirty_ = true;
    t_.pool_.give(std::move(msg.payload));
    return;
  }
  std::unique_ptr<SentPayload> holder;
  if (with_payload > 0) holder = std::make_unique<SentPayload>(std::move(msg.payload), &t_.pool_, with_payload);
  else t_.pool_.give(std::move(msg.payload));
  const Clock::time_point due = *delivered;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    auto& c = chunks[i];
    Outgoing o;
    o.due = due;
    o.header = zmq::message_t(c.header.data(), c.header.size());
    o.bytes = c.header.size() + c.elements * sizeof(float);
    o.last_chunk = i + 1 == chunks.size();
    if (c.elements > 0) {
      o.payload =
          zmq::message_t(holder->data.data() + c.offset, c.elements * sizeof(float), release_payload, holder.get());
      o.has_payload = true;
    }
    link.queue.push_back(std::move(o));
  }
  // From here the zero-copy frames own the holder through its reference count.
  (void)holder.release();
}

void ZmqTransport::IoLoop::enqueue_membership(Link& link, const std::string& to, MessageKind kind, std::string body,
                                              Clock::time_point now) {
  Message m;
  m.kind = kind;
  m.body = std::move(body);
  enqueue(link, to, std::move(m), now);
}

void ZmqTransport::IoLoop::handle_send(std::string to, Message msg) {
  if (is_mixer_kind(msg.kind)) advance_round(msg.round);
  if (to == opt_.name) {
    msg.from = opt_.name;
    deliver(std::move(msg));
    return;
  }
  // A member only heard of is in a view already when another site has heard from it first (views
  // travel faster than its own hello over a slow link): what the view's rounds send it waits on the
  // link opened to greet it, behind that greeting, instead of being lost. Only a member found dead or
  // gone is unreachable.
  const bool reachable = membership().is_alive(to) || membership().only_heard_of(to);
  Link* link = reachable ? ensure_link(to) : nullptr;
  if (!link) {
    ++stats_.dropped_unreachable;
    dirty_ = true;
    t_.pool_.give(std::move(msg.payload));
    return;
  }
  enqueue(*link, to, std::move(msg), Clock::now());
}

ZmqTransport::IoLoop::Clock::time_point ZmqTransport::IoLoop::next_send_time(const Link& link) const {
  const auto due = link.queue.front().due;
  return send_limit_ ? std::max(due, send_limit_->ready_at()) : due;
}

bool ZmqTransport::IoLoop::flush(Clock::time_point now) {
  // The cap counts on the real clock: at leave, `now` is the end of time (everything queued is due).
  const auto capped_now = std::min(now, Clock::now());
  bool capped = false;  // the cap holds the next due message back
  // Hands `link`'s due messages to libzmq; returns whether one went.
  auto drain = [&](Link& link, std::uint64_t* bytes_out) {
    link.blocked = false;
    bool sent = false;
    while (!capped && !link.queue.empty() && link.queue.front().due <= now) {
      if (send_limit_ && !send_limit_->ready(capped_now)) {
        capped = true;
        break;
      }
      Outgoing& o = link.queue.front();
      const auto flags =
          o.has_payload ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::dontwait;
      if (!link.dealer.send(o.header, flags)) {
        link.blocked = true;
        break;
      }
      // Once the first frame is accepted libzmq accepts the rest of the multipart message.
      if (o.has_payload) (void)link.dealer.send(o.payload, zmq::send_flags::dontwait);
      stats_.bytes_sent += o.bytes;
      if (bytes_out) *bytes_out += o.bytes;
      if (o.last_chunk) ++stats_.messages_sent;
      if (send_limit_) send_limit_->take(o.bytes);
      dirty_ = true;
      link.queue.pop_front();
      sent = true;
    }
    return sent;
  };
  bool any_blocked = false;
  auto drain_member = [&](std::pair<const std::string, Link>& entry) {
    if (drain(entry.second, &traffic_[entry.first].out)) capped_last_ = entry.first;
    any_blocked = any_blocked || entry.second.blocked;
  };
  // Under a cap the links take turns, each flush starting after the one that sent last, so that one
  // busy link does not keep the others waiting; without one the order does not matter.
  const auto first = send_limit_ ? links_.upper_bound(capped_last_) : links_.begin();
  for (auto it = first; it != links_.end(); ++it) drain_member(*it);
  for (auto it = links_.begin(); it != first; ++it) drain_member(*it);
  for (auto& b : bootstraps_) drain(b.link, nullptr);
  for (auto& [name, link] : refusal_links_) drain(link, nullptr);
  return any_blocked;
}

void ZmqTransport::IoLoop::handle_leave(std::chrono::milliseconds linger) {
  // Read what has arrived first: a member whose own leave is waiting there has closed its end, and a
  // message queued to it now could never go out and would hold the exit for the whole linger. Reading
  // its leave closes its link instead (member_gone()). Bounded like step()'s reads.
  for (int i = 0; i < 4096 && receive_one(); ++i) {
  }
  const auto now = Clock::now();
  driver_->leave(now);
  // Give the leave (and whatever was queued before it) a bounded chance to go out.
  const auto deadline = now + linger;
  while (Clock::now() < deadline) {
    flush(Clock::time_point::max());
    bool pending = false;
    for (auto& [name, link] : links_) pending = pending || !link.queue.empty();
    if (!pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int remaining = static_cast<int>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  for (auto& [name, link] : links_) link.dealer.set(zmq::sockopt::linger, remaining);
  spdlog::info("'{}' left the federation", opt_.name);
  stop_ = true;
}

}  // namespace meridian::peer

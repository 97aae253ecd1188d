#include "peer/in_memory_transport.h"

#include <stdexcept>

#include "error/error.h"
#include "peer/buffer_pool.h"

namespace meridian::peer {

class InMemoryTransport final : public Transport {
 public:
  InMemoryTransport(std::shared_ptr<InMemoryNetwork> net, std::string self)
      : net_(std::move(net)), self_(std::move(self)) {}

  const std::string& self() const override { return self_; }

  void send(const std::string& to, Message msg) override { net_->deliver(self_, to, std::move(msg)); }

  std::optional<Message> receive(std::chrono::milliseconds timeout) override { return net_->take(self_, timeout); }

  View view_for(std::uint64_t round) const override { return net_->view_for(round); }

  // Payloads travel by move, so a buffer a peer sent ends up here once this site recycles it, and its
  // own next send reuses it: without the pool every large message would be a fresh buffer, zero-filled
  // and faulted in page by page, which cost more than the mixers' own work.
  std::vector<float> take_buffer(std::size_t elements) override { return pool_.take(elements); }
  void recycle(std::vector<float>&& payload) override { pool_.give(std::move(payload)); }

 private:
  std::shared_ptr<InMemoryNetwork> net_;
  std::string self_;
  BufferPool pool_;
};

std::shared_ptr<InMemoryNetwork> InMemoryNetwork::create(const std::vector<std::string>& sites) {
  return std::shared_ptr<InMemoryNetwork>(new InMemoryNetwork(sites));
}

InMemoryNetwork::InMemoryNetwork(const std::vector<std::string>& sites) {
  for (const auto& s : sites) boxes_[s];
  views_.push_back(View::of(sites));
}

std::unique_ptr<Transport> InMemoryNetwork::endpoint(const std::string& site) {
  {
    std::lock_guard lock(mu_);
    if (!boxes_.contains(site)) throw error::InternalError("in-memory network has no site '" + site + "'");
  }
  return std::make_unique<InMemoryTransport>(shared_from_this(), site);
}

void InMemoryNetwork::kill(const std::string& site) {
  std::lock_guard lock(mu_);
  auto it = boxes_.find(site);
  if (it == boxes_.end()) return;
  it->second.alive = false;
  it->second.queue.clear();
  arrived_.notify_all();
}

void InMemoryNetwork::announce(View view) {
  std::lock_guard lock(mu_);
  views_.push_back(std::move(view));
}

std::uint64_t InMemoryNetwork::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void InMemoryNetwork::deliver(const std::string& from, const std::string& to, Message msg,
                              std::uint64_t model_fingerprint) {
  std::lock_guard lock(mu_);
  auto src = boxes_.find(from);
  auto dst = boxes_.find(to);
  if (src == boxes_.end() || dst == boxes_.end() || !src->second.alive || !dst->second.alive) {
    ++dropped_;
    return;
  }
  msg.from = from;
  dst->second.queue.push_back({std::move(msg), model_fingerprint});
  arrived_.notify_all();
}

std::optional<Message> InMemoryNetwork::take(const std::string& site, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto& box = boxes_.at(site);
  // A dead site hears nothing; it returns on the deadline like a site whose peers went quiet.
  if (!arrived_.wait_for(lock, timeout, [&] { return box.alive && !box.queue.empty(); })) return std::nullopt;
  Message msg = std::move(box.queue.front().msg);
  box.queue.pop_front();
  return msg;
}

void InMemoryNetwork::attach(const std::string& site) {
  std::lock_guard lock(mu_);
  auto& box = boxes_[site];
  if (box.attached) throw error::PeerError("site '" + site + "' is already a member on this in-memory network");
  box = Mailbox{{}, true, true};
}

void InMemoryNetwork::detach(const std::string& site) {
  std::lock_guard lock(mu_);
  auto& box = boxes_.at(site);
  box = Mailbox{{}, false, false};
  arrived_.notify_all();
}

std::optional<InMemoryNetwork::Envelope> InMemoryNetwork::take_until(const std::string& site,
                                                                     std::chrono::steady_clock::time_point deadline,
                                                                     const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  auto& box = boxes_.at(site);
  if (!arrived_.wait_until(lock, deadline, [&] { return stop || (box.alive && !box.queue.empty()); }) || stop)
    return std::nullopt;
  Envelope envelope = std::move(box.queue.front());
  box.queue.pop_front();
  return envelope;
}

void InMemoryNetwork::interrupt() {
  std::lock_guard lock(mu_);
  arrived_.notify_all();
}

View InMemoryNetwork::view_for(std::uint64_t round) const {
  std::lock_guard lock(mu_);
  const View* best = &views_.front();
  for (const auto& v : views_)
    if (v.effective_round <= round && v.id >= best->id) best = &v;
  return *best;
}

}  // namespace meridian::peer

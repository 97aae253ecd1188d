// Test transport: forwards everything to another transport but drops the sends a predicate picks, as a
// link that went down for an instant would (nobody is found dead; the message is simply lost). Counts
// what it dropped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "peer/transport.h"

namespace meridian::gossip::testing {

class DroppingTransport final : public peer::Transport {
 public:
  // drop(to, msg): true loses `msg` on its way to `to`.
  using Drop = std::function<bool(const std::string& to, const peer::Message& msg)>;

  DroppingTransport(std::unique_ptr<peer::Transport> inner, Drop drop)
      : inner_(std::move(inner)), drop_(std::move(drop)) {}

  const std::string& self() const override { return inner_->self(); }
  void send(const std::string& to, peer::Message msg) override {
    if (drop_(to, msg)) {
      ++dropped_;
      return;
    }
    inner_->send(to, std::move(msg));
  }
  std::optional<peer::Message> receive(std::chrono::milliseconds timeout) override { return inner_->receive(timeout); }
  peer::View view_for(std::uint64_t round) const override { return inner_->view_for(round); }
  std::vector<float> take_buffer(std::size_t elements) override { return inner_->take_buffer(elements); }
  void recycle(std::vector<float>&& payload) override { inner_->recycle(std::move(payload)); }

  // Messages dropped so far; may be read from any thread.
  std::uint64_t dropped() const { return dropped_.load(); }

 private:
  std::unique_ptr<peer::Transport> inner_;
  Drop drop_;
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace meridian::gossip::testing

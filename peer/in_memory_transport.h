// In-memory transport: many sites in one process (one thread each), for multi-site tests and
// in-process simulation. Delivery is immediate and FIFO per (sender, receiver) pair.
// endpoint() gives a plain Transport whose views are the ones announce()d; a site that runs the
// membership protocol itself joins as an InMemoryFederation (peer/in_memory_federation.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "peer/transport.h"

namespace meridian::peer {

// The shared medium. Thread-safe: every endpoint and the test driving it may call it concurrently.
// Owns the mailboxes; endpoints hold a shared_ptr to it, so it outlives them.
class InMemoryNetwork : public std::enable_shared_from_this<InMemoryNetwork> {
 public:
  // Creates a network whose first view holds `sites` (id 0, effective from round 0).
  static std::shared_ptr<InMemoryNetwork> create(const std::vector<std::string>& sites);

  // The transport of one site. Throws error::InternalError if `site` is not in the network.
  std::unique_ptr<Transport> endpoint(const std::string& site);

  // Simulates a crash: messages to and from `site` are dropped from now on; its pending mail is lost.
  void kill(const std::string& site);

  // Announces a view; endpoints return it from view_for(round) for rounds >= view.effective_round.
  void announce(View view);

  // Messages dropped because the destination was dead or unknown.
  std::uint64_t dropped() const;

 private:
  friend class InMemoryTransport;
  friend class InMemoryFederation;
  // A message on its way, with the model fingerprint its sender stamped on it as a wire header would
  // carry it (0 from a plain endpoint).
  struct Envelope {
    Message msg;
    std::uint64_t model_fingerprint = 0;
  };
  struct Mailbox {
    std::deque<Envelope> queue;
    bool alive = true;
    bool attached = false;  // an InMemoryFederation serves it
  };

  explicit InMemoryNetwork(const std::vector<std::string>& sites);
  void deliver(const std::string& from, const std::string& to, Message msg, std::uint64_t model_fingerprint = 0);
  std::optional<Message> take(const std::string& site, std::chrono::milliseconds timeout);
  // For InMemoryFederation: attach() gives `site` an empty live mailbox (a new site, or one that
  // crashed or left coming back) and throws error::PeerError when another member serves it;
  // detach() closes it like kill(). take_until() waits until mail for `site` is there, `deadline`
  // passes or `stop` is set (interrupt() wakes every waiter to look at it).
  void attach(const std::string& site);
  void detach(const std::string& site);
  std::optional<Envelope> take_until(const std::string& site, std::chrono::steady_clock::time_point deadline,
                                     const std::atomic<bool>& stop);
  void interrupt();
  View view_for(std::uint64_t round) const;

  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::map<std::string, Mailbox> boxes_;
  std::vector<View> views_;  // in announcement order
  std::uint64_t dropped_ = 0;
};

}  // namespace meridian::peer

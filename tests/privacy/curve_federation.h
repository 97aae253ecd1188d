// Test fixture: sites as real ZeroMQ transports on tcp://127.0.0.1:* (ephemeral ports) with CurveZMQ
// keys and a roster, one thread each in this process; each site's pair keys for secure aggregation
// come from the same CurveZMQ keys, as in the daemon.
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "peer/zmq/zmq_transport.h"
#include "privacy/pair_keys.h"
#include "tests/support/eventually.h"

namespace meridian::privacy::testing {

inline std::vector<std::string> site_names(std::size_t n) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) names.push_back("site" + std::to_string(i));
  return names;  // sorted for n <= 10: rank i is names[i]
}

struct CurveFederation {
  std::vector<std::string> names;
  std::map<std::string, peer::CurveKeyPair> keys;
  peer::Roster roster;
  std::vector<std::unique_ptr<peer::ZmqTransport>> sites;

  explicit CurveFederation(std::vector<std::string> all) : names(std::move(all)) {
    using namespace std::chrono_literals;
    for (const auto& n : names) {
      keys[n] = peer::generate_curve_key_pair();
      roster.add({n, keys[n].public_key, ""});
    }
    for (const auto& n : names) {
      peer::ZmqTransportOptions o;
      o.name = n;
      o.keys = keys.at(n);
      o.roster = roster;
      if (!sites.empty()) o.bootstrap = {names[0] + "@" + sites[0]->endpoint()};
      o.heartbeat_interval = 50ms;
      // Long enough that a loaded machine starving an I/O thread does not declare a live site dead (a
      // false death changes the view mid-round); the crash test waits this long once.
      o.heartbeat_timeout = 5000ms;
      sites.push_back(std::make_unique<peer::ZmqTransport>(o));
    }
  }

  // The pair keys of site `name`, looking peers up in the roster.
  std::unique_ptr<PairKeys> pair_keys(const std::string& name) const {
    return std::make_unique<PairKeys>(keys.at(name), [this](const std::string& peer) -> std::optional<std::string> {
      const auto* e = roster.by_name(peer);
      if (!e) return std::nullopt;
      return e->public_key;
    });
  }

  // Waits until every live site counts exactly `members` alive and runs in the same view holding
  // them; returns it (a site may take a view with a member in it before that member's own hello has
  // reached it, and until then may still propose a view without it).
  peer::View agreed_view(const std::vector<std::string>& members) {
    auto live = [&] {
      std::vector<peer::ZmqTransport*> out;
      for (auto& s : sites)
        if (s && std::count(members.begin(), members.end(), s->self())) out.push_back(s.get());
      return out;
    };
    REQUIRE(tests::eventually([&] {
      auto l = live();
      for (auto* s : l)
        if (s->alive_members() != members || s->latest_view().members != members ||
            !(s->latest_view() == l[0]->latest_view()))
          return false;
      return true;
    }));
    return live()[0]->latest_view();
  }

  // Runs body(rank, transport) on one thread per listed site. An exception a body throws (a mixer's
  // MixError, say) is rethrown here after every thread has joined, so that the test case fails with its
  // message instead of std::terminate aborting the whole test run.
  void run(const std::vector<std::size_t>& ranks, const std::function<void(std::size_t, peer::ZmqTransport&)>& body) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i)
      threads.emplace_back([&, i] {
        try {
          body(ranks[i], *sites[ranks[i]]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
};

}  // namespace meridian::privacy::testing

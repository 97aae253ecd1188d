// Test fixture: n sites in one process on the in-memory transport, each with its own communication
// thread (a MixThread serving the site's mixers) and a trainer body run on its own thread, the shape
// the daemon has.
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gossip/average_mixer.h"
#include "gossip/byzantine_mixer.h"
#include "gossip/direct_mean_mixer.h"
#include "gossip/group_mixer.h"
#include "gossip/inbox.h"
#include "gossip/mix_channel.h"
#include "gossip/mix_server.h"
#include "gossip/push_sum_mixer.h"
#include "peer/in_memory_transport.h"

namespace meridian::gossip::testing {

enum class MixerKind { kAverage, kPushSum, kGroup, kDirectMean };

inline std::vector<std::string> site_names(std::size_t n) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) names.push_back("site" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  return names;  // already sorted, so rank i is names[i]
}

struct TestSite {
  std::unique_ptr<peer::Transport> transport;
  std::unique_ptr<Inbox> inbox;
  std::unique_ptr<AverageMixer> averager;
  std::unique_ptr<Mixer> algorithm;
  std::unique_ptr<Mixer> byzantine_algorithm, byzantine_averager;  // wrappers of a Byzantine site's mixers
  std::unique_ptr<MixChannel> channel;
  std::unique_ptr<MixServer> server;
  std::unique_ptr<MixThread> thread;
};

class SiteCluster {
 public:
  // robust: every site's aggregation option. byzantine: ranks whose mixes send scaled garbage
  // (gossip/byzantine_mixer.h) with RMS byzantine_scale times their honest vector's. `compression`
  // applies to kPushSum (fp16) and kDirectMean (none: dense float32). `staleness` is kPushSum's τ,
  // `grid` kGroup's layout (--grid), `graph_period` kPushSum's (diloco-gossip: H).
  SiteCluster(std::size_t n, MixerKind kind, RoundTimeouts timeouts = {}, std::size_t out_peers = 1,
              RobustOptions robust = {}, std::vector<std::size_t> byzantine = {}, double byzantine_scale = 100.0,
              CompressionSpec compression = {}, std::uint64_t staleness = 0, GridSpec grid = {},
              std::uint64_t graph_period = 1)
      : names_(site_names(n)), net_(peer::InMemoryNetwork::create(names_)) {
    for (const auto& name : names_) {
      auto s = std::make_unique<TestSite>();
      s->transport = net_->endpoint(name);
      s->inbox = std::make_unique<Inbox>(*s->transport);
      s->averager = std::make_unique<AverageMixer>(*s->inbox, timeouts, RingOptions{}.max_piece, robust);
      if (kind == MixerKind::kPushSum)
        s->algorithm = std::make_unique<PushSumMixer>(*s->inbox, out_peers, timeouts, robust, compression, staleness,
                                                      graph_period);
      if (kind == MixerKind::kDirectMean)
        s->algorithm = std::make_unique<DirectMeanMixer>(*s->inbox, *s->averager, compression, timeouts);
      if (kind == MixerKind::kGroup) s->algorithm = std::make_unique<GroupMixer>(*s->inbox, timeouts, robust, grid);
      Mixer* algorithm = s->algorithm ? s->algorithm.get() : s->averager.get();
      // As the daemon wires it: the dense direct exchange takes re-averages too.
      Mixer* averager =
          kind == MixerKind::kDirectMean && compression.encoding == Encoding::kDense ? algorithm : s->averager.get();
      const std::size_t rank = sites_.size();
      if (std::find(byzantine.begin(), byzantine.end(), rank) != byzantine.end()) {
        s->byzantine_algorithm = std::make_unique<ByzantineMixer>(*algorithm, byzantine_scale, 1000 + rank);
        s->byzantine_averager = std::make_unique<ByzantineMixer>(*averager, byzantine_scale, 2000 + rank);
        algorithm = s->byzantine_algorithm.get();
        averager = s->byzantine_averager.get();
      }
      s->channel = std::make_unique<MixChannel>();
      s->server = std::make_unique<MixServer>(*s->channel, *algorithm, *averager);
      s->thread = std::make_unique<MixThread>(*s->channel, *s->server);
      sites_.push_back(std::move(s));
    }
  }

  std::size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  peer::InMemoryNetwork& network() { return *net_; }
  TestSite& site(std::size_t rank) { return *sites_.at(rank); }

  // Runs body(rank, channel) for every site on its own trainer thread; rethrows the first exception.
  // Catch2's CHECK and REQUIRE are not thread-safe: bodies record values, the test checks after run().
  void run(const std::function<void(std::size_t, MixChannel&)>& body) {
    std::vector<std::exception_ptr> errors(size());
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < size(); ++r)
      threads.emplace_back([&, r] {
        try {
          body(r, *sites_[r]->channel);
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  std::vector<std::string> names_;
  std::shared_ptr<peer::InMemoryNetwork> net_;
  std::vector<std::unique_ptr<TestSite>> sites_;
};

}  // namespace meridian::gossip::testing

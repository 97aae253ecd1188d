// The metrics one daemon exports on /metrics, as typed members so that the trainer and the
// communication thread set them without spelling metric names. Owns its registry; hand registry() to
// the MetricsServer.
//
// Names (all prefixed meridian_): step, epoch, total_steps, progress_ratio, eta_seconds (the three absent
// until the run's rounds are agreed, ETA until its pace is measured), train_loss, test_accuracy, samples_per_second,
// push_sum_weight, staleness_steps, peers_alive, rounds_abandoned_total, view_waits_given_up_total, peer_rtt_seconds{peer},
// peer_sent_bytes_total{peer}, peer_received_bytes_total{peer}, rejected_messages_total{cause},
// zap_denied_total, secure_aggregation_total{event}, trainer_refusals_total{cause}, trainer_attached (--trainer attached),
// checkpoints_written_total, checkpoint_failures_total, checkpoint_age_seconds,
// site_info{site,algorithm}, and for a shape chosen from the network (--delay auto, --tau auto;
// daemon/algorithms/auto_shape.h; absent for a fixed shape): shape_delay_steps (dts D, diloco's
// overlap τ), shape_period_steps (dts P), shape_tau_steps (sgp τ), shape_round_trip_seconds and
// shape_step_seconds (the view's figures it came from; absent while not measured). train_loss, test_accuracy and
// samples_per_second are absent until first measured (the first progress report, the first evaluation), never a made-up
// 0. The federation view (daemon/federation/federation_view.h), one series per site including this one: federation_step{site},
// federation_epoch{site}, federation_train_loss{site}, federation_test_accuracy{site},
// federation_samples_per_second{site} (absent while that site has not measured them) and
// federation_last_heard_seconds{site} (absent while never heard); max_send_bytes_per_second (--max-send-rate,
// absent without a cap).
//
// Thread-safety: every member may be updated from any thread (see metrics_registry.h).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "daemon/metrics/metrics_registry.h"

namespace meridian::daemon {

class DaemonMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // `site` and `algorithm` go into meridian_site_info so that dashboards can label every series.
  DaemonMetrics(const std::string& site, const std::string& algorithm);
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  const MetricsRegistry& registry() const { return registry_; }

  // Per-peer series of a peer that left the view, so that churn does not grow the exposition forever.
  void forget_peer(const std::string& peer);
  // The federation series of a site that left the federation view.
  void forget_site(const std::string& site);
  // Records a successful checkpoint write at `when`; checkpoint_age_seconds counts from here.
  void checkpoint_written(Clock::time_point when = Clock::now());

 private:
  MetricsRegistry registry_;              // declared first: the members below are references into it
  std::atomic<Clock::rep> last_durable_;  // last checkpoint, or the daemon's start before the first

 public:
  Gauge& step;   // rounds of the run done (daemon/status/run_progress.h)
  Gauge& epoch;  // epochs of the local data those rounds make
  // Each absent until known: the run's rounds once agreed, the share done, the time left once paced.
  Gauge& total_steps;
  Gauge& progress_ratio;
  Gauge& eta_seconds;
  Gauge& train_loss;
  Gauge& test_accuracy;  // fraction in [0, 1] of the last evaluation
  Gauge& dp_epsilon_spent;  // DP-SGD: ε spent so far at the run's δ; absent without DP
  Gauge& samples_per_second;
  Gauge& push_sum_weight;
  Gauge& staleness_steps;  // steps ahead of the oldest mixer message still expected
  // A shape chosen from the network (see above); each absent until set.
  Gauge& shape_delay_steps;
  Gauge& shape_period_steps;
  Gauge& shape_tau_steps;
  Gauge& shape_round_trip_seconds;
  Gauge& shape_step_seconds;
  Gauge& max_send_bytes_per_second;  // --max-send-rate; absent without a cap
  Gauge& peers_alive;  // members of the current view that answer heartbeats, this site included
  Counter& rounds_abandoned;
  // Views a round waited for that did not come into force within the bound (daemon/federation/round_view.h).
  Counter& view_waits_given_up;
  Counter& checkpoints_written;
  Counter& zap_denied;
  Counter& checkpoint_failures;
  Family<Gauge>& peer_rtt_seconds;       // labels: peer
  Family<Counter>& peer_sent_bytes;      // labels: peer
  Family<Counter>& peer_received_bytes;  // labels: peer
  Family<Counter>& rejected_messages;    // labels: cause (as named by the message validator)
  // --secure-aggregation: labels: event (privacy/secure_aggregation_counters.h); absent without it.
  Family<Counter>& secure_aggregation;
  // --trainer attached (daemon/attached/trainer_channel.h): refusals of the trainer or its messages, by cause;
  // and 1 while a trainer is attached.
  Family<Counter>& trainer_refusals;  // labels: cause
  Gauge& trainer_attached;
  // The federation view; labels: site.
  Family<Gauge>& federation_step;
  Family<Gauge>& federation_epoch;
  Family<Gauge>& federation_train_loss;
  Family<Gauge>& federation_test_accuracy;
  Family<Gauge>& federation_samples_per_second;
  Family<Gauge>& federation_last_heard_seconds;
};

}  // namespace meridian::daemon

#include "daemon/metrics/daemon_metrics.h"

namespace meridian::daemon {

DaemonMetrics::DaemonMetrics(const std::string& site, const std::string& algorithm)
    : last_durable_(Clock::now().time_since_epoch().count()),
      step(registry_.gauge("meridian_step",
                           "Rounds of the run completed, counted from the run's first round (a site that joined "
                           "late counts as the federation does).")),
      epoch(registry_.gauge("meridian_epoch", "Epochs of the local data the completed rounds make.")),
      total_steps(registry_.gauge_once_measured("meridian_total_steps",
                                                "Rounds of the run, once the sites have agreed on them.")),
      progress_ratio(registry_.gauge_once_measured("meridian_progress_ratio",
                                                   "Share of the run's rounds completed (0 to 1; x100 for percent).")),
      eta_seconds(registry_.gauge_once_measured(
          "meridian_eta_seconds", "Time left until the run's last round at the pace of the last 30 seconds.")),
      train_loss(
          registry_.gauge_once_measured("meridian_train_loss", "Training loss, averaged over recent local batches.")),
      test_accuracy(registry_.gauge_once_measured("meridian_test_accuracy",
                                                  "Test accuracy (fraction in [0, 1]) of the last evaluation.")),
      dp_epsilon_spent(registry_.gauge_once_measured(
          "meridian_dp_epsilon_spent", "DP-SGD: epsilon spent so far by this site's steps, at the run's delta.")),
      samples_per_second(
          registry_.gauge_once_measured("meridian_samples_per_second", "Local training samples per second.")),
      push_sum_weight(registry_.gauge("meridian_push_sum_weight", "Push-sum weight w of this site (sgp).")),
      staleness_steps(registry_.gauge("meridian_staleness_steps",
                                      "Steps this site is ahead of the oldest mixer message it still expects.")),
      shape_delay_steps(registry_.gauge_once_measured(
          "meridian_shape_delay_steps", "Automatic shape: dts' delay D or diloco's overlap tau, in steps.")),
      shape_period_steps(
          registry_.gauge_once_measured("meridian_shape_period_steps", "Automatic shape: dts' period P, in steps.")),
      shape_tau_steps(
          registry_.gauge_once_measured("meridian_shape_tau_steps", "Automatic shape: sgp's tau, in steps.")),
      shape_round_trip_seconds(registry_.gauge_once_measured(
          "meridian_shape_round_trip_seconds",
          "The federation's largest heartbeat round trip the automatic shape was chosen from.")),
      shape_step_seconds(registry_.gauge_once_measured(
          "meridian_shape_step_seconds", "The federation's largest step time the automatic shape was chosen from.")),
      max_send_bytes_per_second(registry_.gauge_once_measured(
          "meridian_max_send_bytes_per_second",
          "The cap on what this site sends (--max-send-rate), in bytes per second; absent without a cap.")),
      peers_alive(registry_.gauge("meridian_peers_alive",
                                  "Sites of the current view that answer heartbeats, this one included.")),
      rounds_abandoned(registry_.counter("meridian_rounds_abandoned_total",
                                         "Communication rounds abandoned at their deadline and redone.")),
      view_waits_given_up(registry_.counter(
          "meridian_view_waits_given_up_total",
          "New views a round waited for that did not come into force within half the round timeout; the "
          "rounds ran in the view in force.")),
      checkpoints_written(registry_.counter("meridian_checkpoints_written_total", "Checkpoints written.")),
      zap_denied(registry_.counter("meridian_zap_denied_total",
                                   "Connection attempts refused because their key is not in the roster.")),
      checkpoint_failures(registry_.counter("meridian_checkpoint_failures_total",
                                            "Checkpoint writes that failed (see the log for the cause).")),
      peer_rtt_seconds(registry_.gauge_family("meridian_peer_rtt_seconds",
                                              "Round-trip time to the peer, from heartbeats.", {"peer"})),
      peer_sent_bytes(registry_.counter_family("meridian_peer_sent_bytes_total", "Bytes sent to the peer.", {"peer"})),
      peer_received_bytes(
          registry_.counter_family("meridian_peer_received_bytes_total", "Bytes received from the peer.", {"peer"})),
      rejected_messages(registry_.counter_family("meridian_rejected_messages_total",
                                                 "Incoming messages rejected by validation, by cause.", {"cause"})),
      secure_aggregation(registry_.counter_family(
          "meridian_secure_aggregation_total",
          "Secure aggregation: values clipped or not finite, masked shares refused (malformed, stale, unmasked) "
          "and sent, rounds abandoned.",
          {"event"})),
      trainer_refusals(registry_.counter_family(
          "meridian_trainer_refusals_total",
          "Attached trainers or their messages refused (busy, other_user, bad_message, model, non_finite, silent, "
          "disconnected).",
          {"cause"})),
      trainer_attached(registry_.gauge("meridian_trainer_attached", "1 while a trainer process is attached.")),
      federation_step(registry_.gauge_family("meridian_federation_step",
                                             "Training steps of each site, as it last reported them.", {"site"})),
      federation_epoch(registry_.gauge_family("meridian_federation_epoch",
                                              "Epochs of each site, as it last reported them.", {"site"})),
      federation_train_loss(registry_.gauge_family("meridian_federation_train_loss",
                                                   "Training loss of each site, as it last reported it.", {"site"})),
      federation_test_accuracy(
          registry_.gauge_family("meridian_federation_test_accuracy",
                                 "Test accuracy of each site's last evaluation, as it reported it.", {"site"})),
      federation_samples_per_second(
          registry_.gauge_family("meridian_federation_samples_per_second",
                                 "Training samples per second of each site, as it reported them.", {"site"})),
      federation_last_heard_seconds(registry_.gauge_family(
          "meridian_federation_last_heard_seconds",
          "Seconds since each site's last progress summary arrived (0 for this site).", {"site"})) {
  registry_.gauge_callback("meridian_checkpoint_age_seconds",
                           "Seconds since the last checkpoint was written (since start before the first).", [this] {
                             const Clock::duration since(Clock::now().time_since_epoch().count() -
                                                         last_durable_.load(std::memory_order_relaxed));
                             return std::chrono::duration<double>(since).count();
                           });
  registry_
      .gauge_family("meridian_site_info", "Constant 1, labelled with the site and its algorithm.",
                    {"site", "algorithm"})
      .with({site, algorithm})
      .set(1.0);
}

void DaemonMetrics::forget_peer(const std::string& peer) {
  peer_rtt_seconds.remove({peer});
  peer_sent_bytes.remove({peer});
  peer_received_bytes.remove({peer});
}

void DaemonMetrics::forget_site(const std::string& site) {
  for (auto* family : {&federation_step, &federation_epoch, &federation_train_loss, &federation_test_accuracy,
                       &federation_samples_per_second, &federation_last_heard_seconds})
    family->remove({site});
}

void DaemonMetrics::checkpoint_written(Clock::time_point when) {
  last_durable_.store(when.time_since_epoch().count(), std::memory_order_relaxed);
  checkpoints_written.inc();
}

}  // namespace meridian::daemon

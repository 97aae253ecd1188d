// A view of the whole federation from any site. Every site sends a small summary of its progress to
// the live members of the federation once a second, as a peer::MessageKind::kControl message (tag
// kSummaryTag; body below, about 100 bytes); each site keeps the newest summary per sender and a
// thinned history of loss and accuracy for the status page's curves. No coordinator: every site
// shows every site it hears from.
//
// Body: "summary state=S step=N epoch=N loss=X acc=X sps=X w=X stale=N" with the fields in that order;
// X is a decimal number, "nan", or "-" when not measured yet (loss and samples/s before the first
// progress report, accuracy before the first evaluation). S is joining, training, leaving or stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/control/control_protocol.h"
#include "peer/message.h"

namespace meridian::daemon {

inline constexpr std::uint32_t kSummaryTag = 0x73756d6d;  // "summ"

// The summary fields of `row` (state, step, epoch, loss, accuracy, samples/s, weight, staleness) as a
// message body; decode_summary fills those fields of a row, or returns nullopt for anything that is
// not a well-formed summary (never throws).
std::string encode_summary(const SiteRow& row);
std::optional<SiteRow> decode_summary(std::string_view body);
// A kControl message carrying the summary of `row`.
peer::Message summary_message(const SiteRow& row);

// One point of a site's curves: seconds since this view started, and the values then.
struct CurvePoint {
  double seconds = 0;
  std::optional<double> train_loss;
  std::optional<double> test_accuracy;
};

// The summaries heard, newest per site, and each site's curve. Thread-safety: every method may be
// called from any thread (the control thread writes, the metrics server's threads read).
class FederationView {
 public:
  using Clock = std::chrono::steady_clock;

  // `self` names this site; curves count seconds from `origin`.
  FederationView(std::string self, Clock::time_point origin);

  // Records the summary in `msg` (a kControl message with kSummaryTag) from msg.from, heard at `now`.
  // Returns false, recording nothing, when `msg` is not a well-formed summary.
  bool note(const peer::Message& msg, Clock::time_point now);
  // Records this site's own summary.
  void note_self(const SiteRow& row, Clock::time_point now);
  // Keeps only the sites in `members` (this site always stays): a site that left or was taken out of
  // the roster leaves the view. Members never heard from get a row with state "unheard"; `dead` ones
  // are shown as "dead" with their last summary.
  void keep_only(const std::vector<std::string>& members, const std::vector<std::string>& dead);

  // One row per site, this site first, then by name.
  std::vector<SiteRow> rows(Clock::time_point now) const;
  // Each site's curve, oldest point first; at most kCurvePoints points per site (older points are
  // thinned to every other one as the run grows, so the curve always spans the whole run).
  std::map<std::string, std::vector<CurvePoint>> curves() const;

  static constexpr std::size_t kCurvePoints = 512;

 private:
  struct Site {
    SiteRow row;
    std::optional<Clock::time_point> heard;
    bool dead = false;
    std::vector<CurvePoint> curve;
    double curve_spacing = 1.0;  // seconds between kept points (doubles when thinned)
  };
  void record(Site& site, const SiteRow& row, Clock::time_point now);

  const std::string self_;
  const Clock::time_point origin_;
  mutable std::mutex mu_;
  std::map<std::string, Site> sites_;
};

}  // namespace meridian::daemon

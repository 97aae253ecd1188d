#include "gossip/dts.h"

#include <algorithm>
#include <stdexcept>

#include "error/error.h"
#include "gossip/synchronous_average.h"

namespace meridian::gossip {

namespace {
enum class Payload { kWindowW, kGradient, kWindowWU };
Payload payload_of(const DtsConfig& c) {
  if (c.momentum == 0.0) return Payload::kWindowW;
  return c.period == 1 ? Payload::kGradient : Payload::kWindowWU;
}
}  // namespace

std::optional<DtsCompensation> parse_dts_compensation(const std::string& text) {
  if (text == "exact") return DtsCompensation::kExact;
  if (text == "no-momentum") return DtsCompensation::kVanillaRule;
  if (text == "off") return DtsCompensation::kStale;
  if (text == "local") return DtsCompensation::kNone;
  return std::nullopt;
}

Dts::Dts(DtsConfig config, MixChannel& channel, std::span<float> params, std::span<float> momentum_buffer,
         std::span<float> stats)
    : config_(config), channel_(channel), params_(params), u_(momentum_buffer), stats_(stats) {
  if (config_.period == 0) throw error::UserError("dts: period P must be at least 1");
  if (!(config_.momentum >= 0.0 && config_.momentum < 1.0)) throw error::UserError("dts: momentum must be in [0, 1)");
  if (config_.momentum != 0.0 && u_.size() != params_.size())
    throw error::InternalError("dts: momentum buffer has " + std::to_string(u_.size()) + " elements, parameters " +
                               std::to_string(params_.size()));
  window_w_.assign(params_.size(), 0.0f);
  if (payload_of(config_) == Payload::kWindowWU) window_u_.assign(params_.size(), 0.0f);
}

void Dts::note_view(const MixReport& report) {
  abandoned_ += report.abandoned;
  // The first view counts as a change: a site that starts or resumes mid-run holds a model its peers
  // do not, and its first view is the survivors' view change, so they re-average together.
  if (!have_view_ || report.scheduled_view_id != view_id_) reaverage_due_ = true;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
}

void Dts::correct(const Window& window, const std::vector<float>& mean) {
  const std::size_t n = params_.size();
  const double m = config_.momentum;
  // A stale site never applied its own window, so the whole average is its error; the exact rule then
  // applies the average as if it had been applied at its own step.
  const bool stale = config_.compensation == DtsCompensation::kStale;
  const bool exact = config_.compensation == DtsCompensation::kExact || stale;
  auto own = [&](std::size_t i) { return stale ? 0.0 : double(window.local[i]); };
  switch (payload_of(config_)) {
    case Payload::kWindowW:
      for (std::size_t i = 0; i < n; ++i) params_[i] -= static_cast<float>(double(mean[i]) - own(i));
      break;
    case Payload::kGradient:
      for (std::size_t i = 0; i < n; ++i) {
        double du = double(mean[i]) - own(i);
        params_[i] -= static_cast<float>((window.lr + (exact ? window.beta : 0.0)) * du);
        if (exact && m != 0.0) u_[i] += static_cast<float>(window.mpow * du);
      }
      break;
    case Payload::kWindowWU:
      for (std::size_t i = 0; i < n; ++i) {
        double dw = double(mean[i]) - own(i);
        double du = double(mean[n + i]) - own(n + i);
        params_[i] -= static_cast<float>(dw + (exact ? window.beta * du : 0.0));
        if (exact) u_[i] += static_cast<float>(window.mpow * du);
      }
      break;
  }
}

void Dts::take_mean_since(const Window& window, const std::vector<float>& mean) {
  // The exchange carried (w, u) as they were after the window's last step s; since then the site ran
  // L − s more steps on them. Replacing (w_s, u_s) by their mean at s and rerunning those steps on the
  // same gradients would give w + Δw − β·Δu and u + m^(L−s)·Δu (Δx = mean(x) − x_s): a momentum
  // buffer larger by Δu moves every later step by γ_t·m^(t−s)·Δu more. In exact arithmetic the replicas
  // are equal at s, so Δ = 0 and this changes nothing; in floating point it removes the drift
  // accumulated up to s, and no step had to wait for the mean.
  const std::size_t n = params_.size();
  const bool momentum = config_.momentum != 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dw = double(mean[i]) - double(window.local[i]);
    const double du = momentum ? double(mean[n + i]) - double(window.local[n + i]) : 0.0;
    params_[i] += static_cast<float>(dw - window.beta * du);
    if (momentum) u_[i] += static_cast<float>(window.mpow * du);
  }
  // The statistics follow no update rule of their own here: their mean at s replaces their value at s.
  const std::size_t at = momentum ? 2 * n : n;
  for (std::size_t i = 0; i < stats_.size(); ++i)
    stats_[i] += static_cast<float>(double(mean[at + i]) - double(window.local[at + i]));
}

bool Dts::periodic_reaverage_at(std::uint64_t k) const {
  // A window start k with a multiple of reaverage_every in (k − P, k].
  const std::uint64_t r = config_.reaverage_every, p = config_.period;
  return r != 0 && k >= p && k / r != (k - p) / r;
}

bool Dts::folds_reaverages() const {
  // The mean must be exact to replace the weights; only this window is outstanding at the next window
  // start when 1 <= D <= P (D = 0 applies it at once); and the corrections sum to zero over the view
  // only when each site applied its own window.
  const bool corrects_own =
      config_.compensation == DtsCompensation::kExact || config_.compensation == DtsCompensation::kVanillaRule;
  return config_.exact_window_mean && corrects_own && config_.delay >= 1 && config_.delay <= config_.period;
}

bool Dts::can_fold_reaverage() const { return folds_reaverages() && pending_.empty(); }

void Dts::apply_through(std::uint64_t last_step) {
  while (!pending_.empty() && pending_.front().step <= last_step) {
    Window& w = pending_.front();
    MixResult result = channel_.wait(w.step, RoundTag::kMix, config_.wait_timeout);
    note_view(result.report);
    if (w.reaverage) {
      // The re-average that travelled with this window: as after reaverage(), its view is the last seen.
      take_mean_since(w, result.data);
      view_id_ = result.report.scheduled_view_id;
      reaverage_due_ = false;
      ++reaverages_;
    } else {
      correct(w, result.data);
    }
    channel_.recycle(std::move(result.data));
    channel_.recycle(std::move(w.local));
    pending_.pop_front();
  }
}

void Dts::reaverage(std::uint64_t k) {
  apply_through(UINT64_MAX);
  MixReport report;
  if (config_.momentum == 0.0) {
    report = average_now(channel_, k, params_, stats_, config_.wait_timeout, RoundTag::kReaverage);
  } else {
    // The momentum buffer too, as one tensor (n weights, then n momenta): after the exact corrections
    // the buffers are equal in exact arithmetic as well, except on a site that came back from a
    // checkpoint or joined late, whose own momentum would otherwise keep it apart.
    const std::size_t n = params_.size();
    std::vector<float> both = channel_.buffer();
    both.resize(2 * n);
    std::copy(params_.begin(), params_.end(), both.begin());
    std::copy(u_.begin(), u_.end(), both.begin() + static_cast<std::ptrdiff_t>(n));
    report = average_now(channel_, k, both, stats_, config_.wait_timeout, RoundTag::kReaverage);
    std::copy(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(n), params_.begin());
    std::copy(both.begin() + static_cast<std::ptrdiff_t>(n), both.end(), u_.begin());
    channel_.recycle(std::move(both));
  }
  abandoned_ += report.abandoned;
  have_view_ = true;
  view_id_ = report.scheduled_view_id;
  reaverage_due_ = false;
  ++reaverages_;
}

void Dts::close_window(std::uint64_t k, std::span<const float> grad, double lr, bool fold_reaverage) {
  const std::size_t n = params_.size();
  Window w{k, {}, lr, 1.0, 0.0, fold_reaverage};
  MixJob job{k, RoundTag::kMix, channel_.buffer(), 1.0};
  w.local = channel_.buffer();
  if (fold_reaverage) {
    // The re-average replaces the weights (and momentum) by their mean, which already holds this
    // window's average: the window's own payload is not needed. What was sent is kept to take the
    // mean in as a correction D steps later (take_mean_since).
    w.local.assign(params_.begin(), params_.end());
    if (config_.momentum != 0.0) w.local.insert(w.local.end(), u_.begin(), u_.end());
    w.local.insert(w.local.end(), stats_.begin(), stats_.end());
  } else {
    switch (payload_of(config_)) {
      case Payload::kWindowW: w.local.assign(window_w_.begin(), window_w_.end()); break;
      case Payload::kGradient: w.local.assign(grad.begin(), grad.end()); break;
      case Payload::kWindowWU:
        w.local.resize(2 * n);
        std::copy(window_w_.begin(), window_w_.end(), w.local.begin());
        std::copy(window_u_.begin(), window_u_.end(), w.local.begin() + static_cast<std::ptrdiff_t>(n));
        break;
    }
  }
  job.data.assign(w.local.begin(), w.local.end());
  if (!window_u_.empty()) std::fill(window_u_.begin(), window_u_.end(), 0.0f);
  std::fill(window_w_.begin(), window_w_.end(), 0.0f);
  window_len_ = 0;
  channel_.submit(std::move(job), config_.wait_timeout);
  pending_.push_back(std::move(w));
  max_in_flight_ = std::max(max_in_flight_, pending_.size());
}

void Dts::step(std::uint64_t k, std::span<const float> grad, double lr) {
  if (grad.size() != params_.size())
    throw error::InternalError("dts: gradient has " + std::to_string(grad.size()) + " elements, parameters " +
                               std::to_string(params_.size()));
  if (!stepped_) {
    // A site that starts or resumes at a window start did not close the window before it. Where
    // re-averages travel with windows, a periodic one due here went with that window among the sites
    // that closed it, and none of them runs it at this start: running it alone would wait for a round
    // nobody else joins. (The site's first view brings the re-average that pulls it in.)
    if (folds_reaverages()) folded_for_ = k;
    stepped_ = true;
  }
  last_step_ = k;
  const bool averaging = config_.compensation != DtsCompensation::kNone;
  if (averaging && config_.delay >= 1 && k >= config_.delay) apply_through(k - config_.delay);
  // Windows and periodic re-averages follow the absolute step number, so a site that resumes at any
  // step agrees with the others on both. Windows are [jP, (j+1)P); the periodic re-average belongs to
  // the first window start at or after each multiple of `reaverage_every`.
  const std::uint64_t p = config_.period;
  const bool window_start = k % p == 0;
  // The periodic re-average is due here, unless the window that closed before k already carried it.
  if (averaging && window_start && periodic_reaverage_at(k) && folded_for_ != k) reaverage_due_ = true;
  // Only at a window start with nothing outstanding are the replicas equal in exact arithmetic; a
  // re-average elsewhere would mix in the local errors that pending corrections are about to undo.
  if (averaging && reaverage_due_ && window_start) reaverage(k);

  const double m = config_.momentum;
  const std::size_t n = params_.size();
  for (Window& w : pending_) {
    w.mpow *= m;
    w.beta += lr * w.mpow;
  }
  const bool stale = config_.compensation == DtsCompensation::kStale;
  if (m != 0.0) {
    for (std::size_t i = 0; i < n; ++i) {
      u_[i] = static_cast<float>(m * u_[i] + (stale ? 0.0f : grad[i]));
      params_[i] -= static_cast<float>(lr * u_[i]);
    }
  } else if (!stale) {
    for (std::size_t i = 0; i < n; ++i) params_[i] -= static_cast<float>(lr * grad[i]);
  }
  if (!averaging) return;
  switch (payload_of(config_)) {
    case Payload::kWindowW:
      for (std::size_t i = 0; i < n; ++i) window_w_[i] += static_cast<float>(lr * grad[i]);
      break;
    case Payload::kGradient: break;
    case Payload::kWindowWU:
      for (std::size_t i = 0; i < n; ++i) {
        window_u_[i] = static_cast<float>(m * window_u_[i] + grad[i]);
        window_w_[i] += static_cast<float>(lr * window_u_[i]);
      }
      break;
  }
  ++window_len_;
  if ((k + 1) % p == 0) {
    // A re-average due at the next window start travels with this window (see dts.h).
    const std::uint64_t next = k + 1;
    const bool fold = (reaverage_due_ || periodic_reaverage_at(next)) && can_fold_reaverage();
    close_window(k, grad, lr, fold);
    if (fold) {
      // Taken in D steps after the close like any window's average, not waited for at the window start.
      reaverage_due_ = false;
      folded_for_ = next;
    }
  }
  if (config_.delay == 0) apply_through(k);
}

void Dts::reshape(std::uint64_t k, std::uint32_t delay, std::uint32_t period) {
  if (period == 0) throw error::UserError("dts: period P must be at least 1");
  if (delay == config_.delay && period == config_.period) return;
  if (stepped_ && config_.compensation != DtsCompensation::kNone) {
    // Every site reshapes at the same step, so the early close keyed to k − 1 has a partner everywhere.
    // (P = 1 with momentum closes every step: window_len_ is 0 there.)
    if (window_len_ > 0 && k > 0) close_window(k - 1, {}, 0.0, false);
    apply_through(UINT64_MAX);
  }
  config_.delay = delay;
  config_.period = period;
  if (payload_of(config_) == Payload::kWindowWU) window_u_.assign(params_.size(), 0.0f);
  else window_u_.clear();
  std::fill(window_w_.begin(), window_w_.end(), 0.0f);
  window_len_ = 0;
}

void Dts::stop() { apply_through(UINT64_MAX); }

void Dts::finish() {
  if (config_.compensation == DtsCompensation::kNone) return;
  if (window_len_ > 0) {
    // The partial window's gradients count like any other: P = 1 momentum never has one.
    close_window(last_step_, {}, 0.0, false);
  }
  apply_through(UINT64_MAX);
}

}  // namespace meridian::gossip

// A small registry of counters and gauges with labels, rendered in the Prometheus text exposition
// format (version 0.0.4). The daemon's own metric names live in daemon_metrics.h; this file knows
// nothing about them.
//
// Thread-safety: everything here may be used from any thread. Counter and Gauge updates are lock-free;
// looking up a labelled child takes its family's mutex, so hot paths keep the reference they get.
// Lifetime: references returned by the registry live as long as the registry; a labelled child lives
// until Family::remove() is called for its labels.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "error/error.h"

namespace meridian::daemon {

// A value that only goes up (events, bytes). Prometheus names of counters end in "_total".
class Counter {
 public:
  void inc(double by = 1.0) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }
  bool present() const { return true; }  // a counter is always exposed, from 0

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (step, loss, RTT). A gauge may be absent: cleared, it is left out of
// the exposition until the next set() or add(), so that a value nobody measured yet (the accuracy
// before the first evaluation) reads as missing rather than as 0.
class Gauge {
 public:
  void set(double v) {
    value_.store(v, std::memory_order_relaxed);
    present_.store(true, std::memory_order_release);
  }
  void add(double by) {
    value_.fetch_add(by, std::memory_order_relaxed);
    present_.store(true, std::memory_order_release);
  }
  void clear() {
    present_.store(false, std::memory_order_release);
    value_.store(0.0, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }
  bool present() const { return present_.load(std::memory_order_acquire); }

 private:
  std::atomic<double> value_{0.0};
  std::atomic<bool> present_{true};
};

// Formats a sample value as the exposition format wants it (shortest round-trip form, +Inf, -Inf, NaN).
std::string format_metric_value(double v);

// One metric name with its help text, type and label names; holds one child per set of label values.
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~MetricFamily() = default;
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends "# HELP", "# TYPE" and one line per child to `out`.
  virtual void render(std::string& out) const = 0;

 protected:
  void render_header(std::string& out, std::string_view type) const;
  void render_sample(std::string& out, const std::vector<std::string>& label_values, double value) const;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

// A family of Counter or Gauge children, one per distinct tuple of label values.
template <typename Metric>
class Family final : public MetricFamily {
 public:
  using MetricFamily::MetricFamily;

  // The child for `label_values` (one per label name, in order), created at 0 on first use.
  // Throws error::InternalError when the number of values does not match the label names.
  Metric& with(const std::vector<std::string>& label_values) {
    if (label_values.size() != label_names().size()) {
      throw error::InternalError("metric " + name() + " takes " + std::to_string(label_names().size()) +
                                 " label values, got " + std::to_string(label_values.size()));
    }
    std::lock_guard lock(mutex_);
    auto& slot = children_[label_values];
    if (!slot) slot = std::make_unique<Metric>();
    return *slot;
  }
  // Drops the child (e.g. the series of a peer that left the view); references to it become invalid.
  void remove(const std::vector<std::string>& label_values) {
    std::lock_guard lock(mutex_);
    children_.erase(label_values);
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return children_.size();
  }
  void render(std::string& out) const override {
    render_header(out, std::is_same_v<Metric, Counter> ? "counter" : "gauge");
    std::lock_guard lock(mutex_);
    for (const auto& [labels, metric] : children_)
      if (metric->present()) render_sample(out, labels, metric->value());
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

class MetricsRegistry {
 public:
  // Each registers a family under a new name and returns it. Throws error::InternalError when the
  // name or a label name is not a valid Prometheus name or the name is already registered.
  Family<Counter>& counter_family(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names);
  Family<Gauge>& gauge_family(const std::string& name, const std::string& help, std::vector<std::string> label_names);
  Counter& counter(const std::string& name, const std::string& help);
  Gauge& gauge(const std::string& name, const std::string& help);
  // A gauge that starts absent (Gauge::clear): exposed from its first set() on.
  Gauge& gauge_once_measured(const std::string& name, const std::string& help);
  // A gauge computed when rendered (e.g. an age). `read` is called from the rendering thread and must
  // be thread-safe; whatever it captures must outlive the registry.
  void gauge_callback(const std::string& name, const std::string& help, std::function<double()> read);

  // The whole exposition, families in registration order. Safe to call concurrently with updates.
  std::string render() const;

 private:
  void add(std::unique_ptr<MetricFamily> family);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<MetricFamily>> families_;
};

}  // namespace meridian::daemon

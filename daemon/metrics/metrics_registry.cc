#include "daemon/metrics/metrics_registry.h"

#include <charconv>
#include <cmath>

#include "error/error.h"

namespace meridian::daemon {
namespace {

bool is_metric_name(std::string_view s, bool allow_colon) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label values may hold anything (peer names come from the network); the format escapes \, " and newline.
void append_escaped(std::string& out, std::string_view s, bool quote_too) {
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote_too) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

class CallbackGauge final : public MetricFamily {
 public:
  CallbackGauge(std::string name, std::string help, std::function<double()> read)
      : MetricFamily(std::move(name), std::move(help), {}), read_(std::move(read)) {}
  void render(std::string& out) const override {
    render_header(out, "gauge");
    render_sample(out, {}, read_());
  }

 private:
  std::function<double()> read_;
};

}  // namespace

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

void MetricFamily::render_header(std::string& out, std::string_view type) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped(out, help_, false);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type;
  out += '\n';
}

void MetricFamily::render_sample(std::string& out, const std::vector<std::string>& label_values, double value) const {
  out += name_;
  if (!label_values.empty()) {
    out += '{';
    for (std::size_t i = 0; i < label_values.size(); ++i) {
      if (i > 0) out += ',';
      out += label_names_[i];
      out += "=\"";
      append_escaped(out, label_values[i], true);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += format_metric_value(value);
  out += '\n';
}

void MetricsRegistry::add(std::unique_ptr<MetricFamily> family) {
  if (!is_metric_name(family->name(), true)) {
    throw error::InternalError("'" + family->name() + "' is not a valid Prometheus metric name");
  }
  for (const auto& label : family->label_names()) {
    if (!is_metric_name(label, false) || label.starts_with("__")) {
      throw error::InternalError("'" + label + "' is not a valid label name (metric " + family->name() + ")");
    }
  }
  std::lock_guard lock(mutex_);
  for (const auto& f : families_) {
    if (f->name() == family->name()) {
      throw error::InternalError("metric " + family->name() + " is registered twice");
    }
  }
  families_.push_back(std::move(family));
}

Family<Counter>& MetricsRegistry::counter_family(const std::string& name, const std::string& help,
                                                 std::vector<std::string> label_names) {
  auto family = std::make_unique<Family<Counter>>(name, help, std::move(label_names));
  auto& ref = *family;
  add(std::move(family));
  return ref;
}

Family<Gauge>& MetricsRegistry::gauge_family(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  auto family = std::make_unique<Family<Gauge>>(name, help, std::move(label_names));
  auto& ref = *family;
  add(std::move(family));
  return ref;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help) {
  return counter_family(name, help, {}).with({});
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help) {
  return gauge_family(name, help, {}).with({});
}

Gauge& MetricsRegistry::gauge_once_measured(const std::string& name, const std::string& help) {
  Gauge& g = gauge(name, help);
  g.clear();
  return g;
}

void MetricsRegistry::gauge_callback(const std::string& name, const std::string& help, std::function<double()> read) {
  add(std::make_unique<CallbackGauge>(name, help, std::move(read)));
}

std::string MetricsRegistry::render() const {
  std::string out;
  std::lock_guard lock(mutex_);
  for (const auto& family : families_) family->render(out);
  return out;
}

}  // namespace meridian::daemon

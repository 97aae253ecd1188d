#include "peer/link_spec.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "error/error.h"

namespace meridian::peer {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string temporaries.
std::string quoted(std::string_view s) {
  std::string out(1, '"');
  out.append(s);
  out += '"';
  return out;
}

[[noreturn]] void fail(std::string_view spec, std::string_view field, const std::string& problem,
                       std::string_view example) {
  throw error::UserError("link spec \"" + std::string(spec) + "\": " + std::string(field) + " " + problem + " (e.g. " +
                         std::string(example) + ")");
}

// Splits "120ms" into the number 120 and the unit "ms"; nullopt when there is no leading number.
struct Quantity {
  double value;
  std::string unit;  // lower case
};
std::optional<Quantity> split_quantity(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data() || !std::isfinite(v)) return std::nullopt;
  return Quantity{v, lower(trim(std::string_view(end, text.data() + text.size() - end)))};
}

std::chrono::microseconds parse_duration(std::string_view spec, std::string_view key, std::string_view value) {
  const std::string example = std::string(key) + (key == "jitter" ? "=10ms" : "=120ms");
  const auto q = split_quantity(value);
  if (!q) fail(spec, key, quoted(value) + " is not a number with a unit", example);
  double scale = 0;
  if (q->unit == "us") {
    scale = 1;
  } else if (q->unit == "ms") {
    scale = 1e3;
  } else if (q->unit == "s") {
    scale = 1e6;
  } else if (q->unit.empty()) {
    fail(spec, key, quoted(value) + " needs a unit: us, ms or s", example);
  } else {
    fail(spec, key, "unit \"" + q->unit + "\" is unknown; use us, ms or s", example);
  }
  if (q->value < 0) fail(spec, key, "must not be negative", example);
  const double us = q->value * scale;
  if (us > 3600e6) fail(spec, key, quoted(value) + " is longer than an hour", example);
  return std::chrono::microseconds(std::llround(us));
}

// A rate's problem, as it follows the rate's name: parse_rate's message, or the bandwidth field's.
class RateError : public error::UserError {
 public:
  using error::UserError::UserError;
};

double parse_rate_or_throw(std::string_view value, std::string_view zero_hint) {
  constexpr std::string_view kUnits = "bit, kbit, mbit or gbit (per second), or B/s, kB/s, MB/s or GB/s";
  const auto q = split_quantity(value);
  if (!q) throw RateError(quoted(value) + " is not a number with a unit");
  // Bit units say "bit"; the byte units end in "/s" (lower case here: "mb/s" is megabytes per second).
  static constexpr std::array<std::pair<std::string_view, double>, 8> kScales{{{"bit", 1},
                                                                               {"kbit", 1e3},
                                                                               {"mbit", 1e6},
                                                                               {"gbit", 1e9},
                                                                               {"b/s", 8},
                                                                               {"kb/s", 8e3},
                                                                               {"mb/s", 8e6},
                                                                               {"gb/s", 8e9}}};
  const auto scale = std::find_if(kScales.begin(), kScales.end(), [&](const auto& s) { return s.first == q->unit; });
  if (q->unit.empty()) throw RateError(quoted(value) + " needs a unit: " + std::string(kUnits));
  if (scale == kScales.end()) throw RateError("unit \"" + q->unit + "\" is unknown; use " + std::string(kUnits));
  if (q->value <= 0) throw RateError("must be > 0 (" + std::string(zero_hint) + ")");
  return q->value * scale->second;
}

double parse_bandwidth(std::string_view spec, std::string_view value) {
  try {
    return parse_rate_or_throw(value, "leave bandwidth out for an unlimited link");
  } catch (const RateError& e) {
    fail(spec, "bandwidth", e.what(), "bandwidth=50mbit");
  }
}

double parse_loss(std::string_view spec, std::string_view value) {
  constexpr std::string_view kExample = "loss=0.001 or loss=0.1%";
  const auto q = split_quantity(value);
  if (!q || !(q->unit.empty() || q->unit == "%")) {
    fail(spec, "loss", quoted(value) + " is not a probability", kExample);
  }
  const double p = q->unit == "%" ? q->value / 100 : q->value;
  if (p < 0 || p >= 1) fail(spec, "loss", quoted(value) + " is outside [0, 1)", kExample);
  return p;
}

// The shortest text that reads back to the same double (std::to_chars without a precision).
std::string format_number(double v) {
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), ec == std::errc() ? end : buf.data());
}

// In the largest unit that keeps the number whole, as a user would write it: 20mbit, 512kbit.
std::string format_bandwidth(double bits_per_s) {
  for (const auto& [scale, unit] : {std::pair{1e9, "gbit"}, std::pair{1e6, "mbit"}, std::pair{1e3, "kbit"}}) {
    const double n = bits_per_s / scale;
    if (n >= 1 && n == std::floor(n) && n * scale == bits_per_s) return format_number(n) + unit;
  }
  return format_number(bits_per_s) + "bit";
}

std::string format_duration(std::chrono::microseconds d) {
  const auto us = d.count();
  if (us % 1000000 == 0) return std::to_string(us / 1000000) + "s";
  if (us % 1000 == 0) return std::to_string(us / 1000) + "ms";
  return std::to_string(us) + "us";
}

}  // namespace

double parse_rate(std::string_view text) { return parse_rate_or_throw(trim(text), "leave the rate out for no limit"); }

std::string format_rate(double bits_per_s) { return format_bandwidth(bits_per_s); }

std::string LinkSpec::to_string() const {
  std::ostringstream out;
  const char* sep = "";
  if (latency.count() != 0) {
    out << sep << "latency=" << format_duration(latency);
    sep = ",";
  }
  if (jitter.count() != 0) {
    out << sep << "jitter=" << format_duration(jitter);
    sep = ",";
  }
  if (bandwidth_bits_per_s != 0) {
    out << sep << "bandwidth=" << format_bandwidth(bandwidth_bits_per_s);
    sep = ",";
  }
  if (loss != 0) out << sep << "loss=" << format_number(loss);
  return out.str();
}

LinkSpec parse_link_spec(std::string_view text) {
  LinkSpec spec;
  if (trim(text).empty()) return spec;
  std::array<bool, 4> seen{};  // latency, jitter, bandwidth, loss
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view field = trim(rest.substr(0, comma));
    const auto eq = field.find('=');
    if (field.empty()) {
      throw error::UserError("link spec \"" + std::string(text) +
                             "\": empty field (fields are key=value separated by single commas)");
    }
    if (eq == std::string_view::npos) {
      throw error::UserError("link spec \"" + std::string(text) + "\": field \"" + std::string(field) +
                             "\" is not key=value (e.g. latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.001)");
    }
    const std::string key = lower(trim(field.substr(0, eq)));
    const std::string_view value = trim(field.substr(eq + 1));
    std::size_t slot = 0;
    if (key == "latency") {
      slot = 0;
      spec.latency = parse_duration(text, key, value);
    } else if (key == "jitter") {
      slot = 1;
      spec.jitter = parse_duration(text, key, value);
    } else if (key == "bandwidth") {
      slot = 2;
      spec.bandwidth_bits_per_s = parse_bandwidth(text, value);
    } else if (key == "loss") {
      slot = 3;
      spec.loss = parse_loss(text, value);
    } else {
      throw error::UserError("link spec \"" + std::string(text) + "\": unknown field \"" + key +
                             "\"; known fields are latency, jitter, bandwidth and loss");
    }
    if (seen[slot]) {
      throw error::UserError("link spec \"" + std::string(text) + "\": " + key + " is given twice");
    }
    seen[slot] = true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return spec;
}

}  // namespace meridian::peer

// The behaviour of one emulated network link (docs/wan-emulation.md): one-way latency with jitter, bandwidth
// (serialization delay) and loss, and its text form for --wan, e.g.
// "latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.001".
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace meridian::peer {

struct LinkSpec {
  std::chrono::microseconds latency{0}, jitter{0};  // one-way; each message gets latency ± jitter
  double bandwidth_bits_per_s = 0;                  // 0 = unlimited
  double loss = 0;                                  // probability in [0, 1) that a message is dropped

  // Whether the link adds nothing (no delay, no limit, no loss).
  bool is_none() const { return latency.count() == 0 && jitter.count() == 0 && bandwidth_bits_per_s == 0 && loss == 0; }
  // The text parse_link_spec reads back to an equal spec ("" for a link without emulation).
  std::string to_string() const;
  bool operator==(const LinkSpec&) const = default;
};

// Parses comma-separated key=value fields, each at most once, in any order, spaces allowed around them:
//   latency, jitter   a duration >= 0 with unit us, ms or s   (e.g. 120ms, 1.5s)
//   bandwidth         a rate > 0 as parse_rate reads it (e.g. 50mbit)
//   loss              a probability in [0, 1), or a percentage below 100 with % (0.001 or 0.1%)
// An empty (or all-space) string is a link without emulation.
// Throws error::UserError whose message quotes the spec, names the bad field and shows a valid
// example of it.
LinkSpec parse_link_spec(std::string_view text);

// A rate > 0 in bits per second (bandwidth=, --max-send-rate): a number with a unit of bits per second,
// bit, kbit, mbit or gbit, or of bytes per second, B/s, kB/s, MB/s or GB/s; decimal and
// case-insensitive (50mbit = 50e6 bit/s, 10MB/s = 80e6 bit/s). Throws error::UserError with the problem
// as it follows the rate's name (e.g. "\"50\" needs a unit: bit, kbit, ...").
double parse_rate(std::string_view text);
// `bits_per_s` as parse_rate reads it back, in the largest bit unit that keeps it whole (50mbit).
std::string format_rate(double bits_per_s);

}  // namespace meridian::peer

// The send rate cap's token bucket (peer/send_rate_limit.h) on a clock the test drives: over any
// window the bytes it lets go stay within burst + rate × window + one chunk, and it never holds a
// chunk longer than the debt takes to pay.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

#include "error/error.h"
#include "peer/link_spec.h"
#include "peer/send_rate_limit.h"

using meridian::peer::SendRateLimit;
using Clock = SendRateLimit::Clock;
using std::chrono::microseconds;

namespace {

// Sends `chunks` (bytes each) as fast as the bucket allows, the way the transport's loop does: a send
// when ready(), else a wait until ready_at(). Returns when each chunk left.
std::vector<std::pair<Clock::time_point, std::size_t>> send_all(SendRateLimit& limit, Clock::time_point start,
                                                                const std::vector<std::size_t>& chunks) {
  std::vector<std::pair<Clock::time_point, std::size_t>> sent;
  auto now = start;
  for (const auto bytes : chunks) {
    while (!limit.ready(now)) {
      const auto next = limit.ready_at();
      REQUIRE(next > now);  // a wait always moves time on: the loop never spins
      now = next;
    }
    limit.take(bytes);
    sent.emplace_back(now, bytes);
  }
  return sent;
}

// The most bytes sent in any window of `window` that starts at a send.
std::size_t most_in_window(const std::vector<std::pair<Clock::time_point, std::size_t>>& sent, Clock::duration window) {
  std::size_t most = 0;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    std::size_t bytes = 0;
    for (std::size_t j = i; j < sent.size() && sent[j].first - sent[i].first < window; ++j) bytes += sent[j].second;
    most = std::max(most, bytes);
  }
  return most;
}

}  // namespace

TEST_CASE("the send rate cap lets at most burst + rate x window + one chunk go in any window", "[peer][unit]") {
  const double bits_per_s = 8e6;  // 1 MB/s
  const double burst = SendRateLimit::default_burst_bytes(bits_per_s);
  CHECK(burst == 16.0 * 1024);  // 10 ms of 1 MB/s is below the floor
  const auto start = Clock::time_point{} + std::chrono::hours(1);
  SendRateLimit limit(bits_per_s, burst, start);

  // 1 MiB payload chunks with a small header each, mixed with membership-sized messages.
  std::vector<std::size_t> chunks;
  for (int i = 0; i < 40; ++i) {
    chunks.push_back(1024 * 1024 + 60);
    chunks.push_back(120);
    chunks.push_back(3000);
  }
  const auto sent = send_all(limit, start, chunks);
  std::size_t total = 0, largest = 0;
  for (const auto& [when, bytes] : sent) {
    total += bytes;
    largest = std::max(largest, bytes);
  }
  for (const auto window :
       {std::chrono::milliseconds(100), std::chrono::milliseconds(1000), std::chrono::milliseconds(10000)}) {
    INFO("window " << window.count() << " ms");
    const double allowed = burst + 1e6 * std::chrono::duration<double>(window).count() + static_cast<double>(largest);
    CHECK(static_cast<double>(most_in_window(sent, window)) <= allowed);
  }
  // The whole run: what left by the last send is what the rate allows by then, and not much less (the
  // bucket does not hold chunks back longer than the debt takes to pay).
  const double seconds = std::chrono::duration<double>(sent.back().first - start).count();
  const double last_chunk = static_cast<double>(sent.back().second);
  CHECK(static_cast<double>(total) - last_chunk <= burst + 1e6 * seconds);
  CHECK(static_cast<double>(total) >= 1e6 * seconds);
}

TEST_CASE("the send rate cap refills after an idle spell only up to its burst", "[peer][unit]") {
  const auto start = Clock::time_point{} + std::chrono::hours(1);
  SendRateLimit limit(8e3, 2000, start);  // 1000 bytes per second, burst 2000
  CHECK(limit.ready(start));
  limit.take(1500);
  CHECK(limit.ready(start));  // 500 left
  limit.take(1500);           // 1000 in debt
  CHECK_FALSE(limit.ready(start));
  CHECK(limit.ready_at() == start + std::chrono::seconds(1));
  CHECK_FALSE(limit.ready(start + std::chrono::milliseconds(999)));
  CHECK(limit.ready(start + std::chrono::seconds(1)));
  // An hour idle fills the bucket to its burst, no more: 2000 bytes go, then it is in debt again.
  const auto later = start + std::chrono::hours(1);
  CHECK(limit.ready(later));
  limit.take(2000);
  CHECK(limit.ready(later));  // exactly empty is not debt
  limit.take(1);
  CHECK_FALSE(limit.ready(later));
  // A clock that runs back counts as the last time seen.
  CHECK_FALSE(limit.ready(start));
  CHECK(limit.ready_at() > later);
}

TEST_CASE("a send rate reads as the WAN emulation's bandwidth does, in bits or bytes per second", "[peer][unit]") {
  using meridian::peer::format_rate;
  using meridian::peer::parse_rate;
  CHECK(parse_rate("50mbit") == 50e6);
  CHECK(parse_rate("10MB/s") == 80e6);
  CHECK(parse_rate(" 512kB/s ") == 512e3 * 8);
  CHECK(parse_rate("1.5gbit") == 1.5e9);
  CHECK(format_rate(parse_rate("50mbit")) == "50mbit");
  CHECK_THROWS_WITH(parse_rate("50"),
                    Catch::Contains("\"50\" needs a unit: bit, kbit, mbit or gbit") && Catch::Contains("MB/s"));
  CHECK_THROWS_WITH(parse_rate("50mb"), Catch::Contains("unit \"mb\" is unknown"));
  CHECK_THROWS_WITH(parse_rate("0mbit"), Catch::Contains("must be > 0"));
  CHECK_THROWS_AS(parse_rate("fast"), meridian::error::UserError);
  CHECK_THROWS_AS(SendRateLimit(0, 1000, Clock::now()), meridian::error::InternalError);
}

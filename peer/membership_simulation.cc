#include "peer/membership_simulation.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "error/error.h"
#include "peer/membership_driver.h"
#include "peer/wire_codec.h"

namespace meridian::peer {

namespace {

using Clock = MembershipDriver::Clock;
using std::chrono::microseconds;

// Virtual time starts a day past the clock's epoch: the driver treats a zero time stamp as "none".
const Clock::time_point kEpoch = Clock::time_point(std::chrono::hours(24));
// Any full 64-bit fingerprint: it costs the header what a real model's hash costs.
constexpr std::uint64_t kFingerprint = 0x9e3779b97f4a7c15ull;
// Incarnations as a real site's (milliseconds since the Unix epoch), fixed for a reproducible run.
constexpr std::uint64_t kIncarnation = 1'790'000'000'000ull;

std::string site_name(std::size_t i, std::size_t sites) {
  const std::size_t width = std::max<std::size_t>(4, std::to_string(sites - 1).size());
  std::string digits = std::to_string(i);
  return "site-" + std::string(width - digits.size(), '0') + digits;
}

// A private address per site, as long as a real one.
std::string site_address(std::size_t i) {
  return "tcp://10." + std::to_string(i / 65536 % 256) + "." + std::to_string(i / 256 % 256) + "." +
         std::to_string(i % 256) + ":7000";
}

// The size of the one frame a membership message travels as.
std::size_t wire_bytes(MessageKind kind, std::string body, std::uint64_t message_id) {
  Message m;
  m.kind = kind;
  m.body = std::move(body);
  return encode_message(m, kFingerprint, message_id, WireLimits{}).front().header.size();
}

// This thread's CPU time: what the driver costs, without the time the thread waited for a core on a
// shared machine.
std::chrono::nanoseconds cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Simulation;

// One site: the real driver, and the port that does to the simulated network what the ZeroMQ
// transport's port does to its connections (peer/zmq/zmq_membership_port.cc).
class Site final : public MembershipPort {
 public:
  Site(Simulation& sim, std::size_t index) : sim_(sim), index_(index) {}

  void send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point now) override;
  void member_restarted(const std::string& name) override;
  void member_joined(const std::string&) override {}  // a simulated site never moves
  void member_gone(const std::string& name, bool died) override;
  void adopt_bootstraps() override;
  void greet_bootstraps(const std::string& hello, Clock::time_point now) override;
  void membership_changed() override;

  std::size_t index() const { return index_; }

  std::optional<MembershipDriver> driver;
  std::vector<std::size_t> bootstraps;  // not yet known as members
  std::unordered_set<std::size_t> links;
  Clock::time_point start;
  Clock::time_point timer_due = Clock::time_point::max();
  bool started = false;
  bool crashed = false;
  bool joined_all = false;    // holds in force a view of all sites
  bool holds_live = false;    // after the crash: holds in force a view of exactly the live sites
  std::uint64_t message_id = 0;
  std::shared_ptr<const std::string> last_body;  // shares a body sent to many members at once
  // Counted while the simulation counts (the steady window).
  std::uint64_t bytes = 0, heartbeat_bytes = 0, members_bytes = 0, messages = 0;
  std::chrono::nanoseconds driver_time{}, port_time{};  // CPU time inside the driver, and inside this port

 private:
  Simulation& sim_;
  std::size_t index_;
};

struct Event {
  enum class Type { kStart, kTimer, kDeliver };
  Clock::time_point at;
  std::uint64_t seq;
  Type type;
  std::size_t site;
  std::size_t from = 0;
  MessageKind kind = MessageKind::kHeartbeat;
  std::shared_ptr<const std::string> body;
  bool operator>(const Event& o) const { return std::tie(at, seq) > std::tie(o.at, o.seq); }
};

class Simulation {
 public:
  explicit Simulation(const MembershipSimulationOptions& options);
  MembershipSimulationReport run();

  // For the sites' ports.
  std::optional<std::size_t> index_of(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  void send(std::size_t from, std::size_t to, MessageKind kind, std::shared_ptr<const std::string> body);
  void died(std::size_t observer, const std::string& name);
  void views_changed(std::size_t site);
  Clock::time_point now() const { return now_; }
  bool counting() const { return counting_; }
  const std::string& name(std::size_t i) const { return names_[i]; }

 private:
  void push(Event e) {
    e.seq = next_seq_++;
    queue_.push(std::move(e));
  }
  void schedule_timer(Site& site, Clock::time_point not_before);
  void process(Event e);
  // Processes events up to `limit` (or until `stop` holds), then moves the clock to `limit`.
  void run_until(Clock::time_point limit, const std::function<bool()>& stop = {});
  template <typename F>
  void timed(Site& site, F&& call);
  bool holds_exactly_live(const View& v) const;

  MembershipSimulationOptions opt_;
  std::mt19937_64 rng_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::unique_ptr<Site>> sites_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t next_seq_ = 0;
  std::unordered_map<std::uint64_t, Clock::time_point> link_busy_;  // from * n + to: last arrival on it
  Clock::time_point now_ = kEpoch;
  bool counting_ = false;
  std::uint64_t messages_ = 0;
  std::size_t largest_members_ = 0;

  // Join wave.
  std::size_t joined_all_ = 0;
  std::optional<Clock::time_point> join_done_;
  std::uint64_t join_view_id_ = 0;
  // Crash.
  std::set<std::size_t> crashed_;
  std::optional<Clock::time_point> crash_at_;
  std::size_t holds_live_ = 0;
  std::optional<Clock::time_point> new_view_done_;
  std::uint64_t crash_view_id_ = 0;
  std::map<std::pair<std::size_t, std::size_t>, Clock::time_point> detected_;  // (observer, crashed)
  std::size_t false_deaths_ = 0;
};

void Site::send_membership(const std::string& to, MessageKind kind, std::string body, Clock::time_point) {
  const auto started_at = cpu_now();
  const auto target = sim_.index_of(to);
  const auto* record = driver->membership().find(to);
  // As ensure_link: only to a site with a record and an address, never to itself.
  if (target && *target != index_ && record && !record->address.empty()) {
    if (links.insert(*target).second)
      sim_.send(index_, *target, MessageKind::kHello,
                std::make_shared<const std::string>(encode_hello(driver->membership().hello())));
    if (!last_body || *last_body != body) last_body = std::make_shared<const std::string>(std::move(body));
    sim_.send(index_, *target, kind, last_body);
  }
  port_time += cpu_now() - started_at;
}

void Site::member_restarted(const std::string& name) {
  if (auto i = sim_.index_of(name)) links.erase(*i);
}

void Site::member_gone(const std::string& name, bool died) {
  if (auto i = sim_.index_of(name)) links.erase(*i);
  if (died) sim_.died(index_, name);
}

void Site::adopt_bootstraps() {
  // A bootstrap connection becomes the member's connection (it said hello already).
  std::erase_if(bootstraps, [&](std::size_t b) {
    if (!driver->membership().is_alive(sim_.name(b))) return false;
    links.insert(b);
    return true;
  });
}

void Site::greet_bootstraps(const std::string& hello, Clock::time_point) {
  const auto started_at = cpu_now();
  for (std::size_t b : bootstraps) sim_.send(index_, b, MessageKind::kHello, std::make_shared<const std::string>(hello));
  port_time += cpu_now() - started_at;
}

void Site::membership_changed() { sim_.views_changed(index_); }

Simulation::Simulation(const MembershipSimulationOptions& options) : opt_(options), rng_(options.seed) {
  if (opt_.sites < 2) throw error::UserError("a membership simulation needs 2 sites at least");
  if (opt_.bootstraps < 1 || opt_.bootstraps > opt_.sites)
    throw error::UserError("bootstraps must be between 1 and the number of sites (" + std::to_string(opt_.sites) + ")");
  if (!(opt_.loss >= 0 && opt_.loss < 1)) throw error::UserError("loss must be in [0, 1)");
  if (opt_.heartbeat_interval.count() <= 0 || opt_.heartbeat_timeout <= opt_.heartbeat_interval)
    throw error::UserError("the heartbeat timeout must exceed the heartbeat interval, which must be positive");
  for (std::size_t i = 0; i < opt_.sites; ++i) {
    names_.push_back(site_name(i, opt_.sites));
    index_.emplace(names_.back(), i);
    sites_.push_back(std::make_unique<Site>(*this, i));
  }
}

void Simulation::send(std::size_t from, std::size_t to, MessageKind kind, std::shared_ptr<const std::string> body) {
  ++messages_;
  Site& s = *sites_[from];
  const std::size_t wire = wire_bytes(kind, *body, ++s.message_id);
  if (kind == MessageKind::kMembers) largest_members_ = std::max(largest_members_, wire);
  if (counting_) {
    s.bytes += wire;
    ++s.messages;
    if (kind == MessageKind::kHeartbeat) s.heartbeat_bytes += wire;
    if (kind == MessageKind::kMembers) s.members_bytes += wire;
  }
  const LinkSpec& link = opt_.wan.link(opt_.wan.region_of_site(from), opt_.wan.region_of_site(to));
  auto delay = std::chrono::duration_cast<Clock::duration>(link.latency);
  if (link.jitter.count() > 0) {
    const auto j = std::uniform_int_distribution<std::int64_t>(-link.jitter.count(), link.jitter.count())(rng_);
    delay = std::max(Clock::duration::zero(), delay + std::chrono::duration_cast<Clock::duration>(microseconds(j)));
  }
  std::uniform_real_distribution<double> coin(0, 1);
  auto rto = std::chrono::duration_cast<Clock::duration>(opt_.retransmit_timeout);
  while (opt_.loss > 0 && coin(rng_) < opt_.loss) {
    if (opt_.loss_kind == SimulatedLoss::kDrop) return;
    delay += rto;
    rto *= 2;  // TCP backs off exponentially
  }
  // A link delivers in order: nothing overtakes the message before it (a retransmission included).
  auto& busy = link_busy_[static_cast<std::uint64_t>(from) * opt_.sites + to];
  const auto at = std::max(now_ + delay, busy);
  busy = at;
  push(Event{at, 0, Event::Type::kDeliver, to, from, kind, std::move(body)});
}

void Simulation::died(std::size_t observer, const std::string& name) {
  const std::size_t victim = index_.at(name);
  if (crashed_.contains(victim)) detected_.try_emplace({observer, victim}, now_);
  else ++false_deaths_;
}

bool Simulation::holds_exactly_live(const View& v) const {
  if (v.size() != opt_.sites - crashed_.size()) return false;
  return std::none_of(crashed_.begin(), crashed_.end(), [&](std::size_t c) { return v.rank_of(names_[c]).has_value(); });
}

void Simulation::views_changed(std::size_t i) {
  Site& s = *sites_[i];
  const View& v = s.driver->membership().views_in_force().back();
  if (!s.joined_all && v.size() == opt_.sites) {
    s.joined_all = true;
    join_view_id_ = std::max(join_view_id_, v.id);
    if (++joined_all_ == opt_.sites && !join_done_) join_done_ = now_;
  }
  if (crash_at_ && !s.crashed && !s.holds_live && holds_exactly_live(v)) {
    s.holds_live = true;
    crash_view_id_ = v.id;
    if (++holds_live_ == opt_.sites - crashed_.size()) new_view_done_ = now_;
  }
}

template <typename F>
void Simulation::timed(Site& site, F&& call) {
  const auto port_before = site.port_time;
  const auto started_at = cpu_now();
  call();
  const auto spent = cpu_now() - started_at - (site.port_time - port_before);
  if (counting_) site.driver_time += spent;
}

void Simulation::schedule_timer(Site& site, Clock::time_point not_before) {
  const auto due = std::max(site.driver->next_due(), not_before);
  if (due == site.timer_due) return;
  site.timer_due = due;
  push(Event{due, 0, Event::Type::kTimer, site.index(), 0, MessageKind::kHeartbeat, nullptr});
}

void Simulation::process(Event e) {
  now_ = e.at;
  Site& s = *sites_[e.site];
  if (s.crashed) return;
  switch (e.type) {
    case Event::Type::kStart: {
      MembershipConfig config{names_[e.site],
                              site_address(e.site),
                              opt_.wan.region_name(opt_.wan.region_of_site(e.site)),
                              kIncarnation + e.site,
                              opt_.heartbeat_timeout,
                              8,
                              [this](const std::string& n) { return index_.contains(n); },
                              {},
                              false};
      s.driver.emplace(std::move(config), MembershipTiming{opt_.heartbeat_interval, opt_.heartbeat_timeout, nullptr}, s,
                       now_);
      s.started = true;
      timed(s, [&] { s.driver->on_timer(now_); });
      s.timer_due = Clock::time_point::max();
      break;
    }
    case Event::Type::kTimer:
      if (e.at != s.timer_due) return;  // superseded by an earlier or later due time
      s.timer_due = Clock::time_point::max();
      timed(s, [&] { s.driver->on_timer(now_); });
      break;
    case Event::Type::kDeliver:
      if (!s.started) {
        // Like a connection to a site that is not listening yet: what was sent waits for it.
        e.at = s.start;
        push(std::move(e));
        return;
      }
      timed(s, [&] {
        if (e.kind == MessageKind::kHello) {
          auto hello = decode_hello(*e.body);
          if (auto* h = std::get_if<HelloInfo>(&hello); h && h->name == names_[e.from]) s.driver->on_hello(*h, now_);
        } else {
          s.driver->on_message(names_[e.from], e.kind, *e.body, now_);
        }
      });
      break;
  }
  schedule_timer(s, e.type == Event::Type::kDeliver ? now_ : now_ + Clock::duration(1));
}

void Simulation::run_until(Clock::time_point limit, const std::function<bool()>& stop) {
  while (!queue_.empty() && queue_.top().at <= limit) {
    if (stop && stop()) return;
    Event e = queue_.top();
    queue_.pop();
    process(std::move(e));
  }
  now_ = limit;
}

MembershipSimulationReport Simulation::run() {
  MembershipSimulationReport report;
  report.sites = opt_.sites;
  std::uniform_int_distribution<std::int64_t> spread(
      0, std::max<std::int64_t>(0, std::chrono::duration_cast<microseconds>(opt_.start_spread).count() - 1));
  for (std::size_t i = 0; i < opt_.sites; ++i) {
    Site& s = *sites_[i];
    for (std::size_t b = 0; b < opt_.bootstraps; ++b)
      if (b != i) s.bootstraps.push_back(b);
    s.start = kEpoch + microseconds(spread(rng_));
    push(Event{s.start, 0, Event::Type::kStart, i, 0, MessageKind::kHeartbeat, nullptr});
  }

  run_until(kEpoch + opt_.join_limit, [&] { return join_done_.has_value(); });
  if (join_done_) {
    report.join_time = std::chrono::duration_cast<microseconds>(*join_done_ - kEpoch);
    report.join_view_id = join_view_id_;
  }
  run_until(join_done_.value_or(now_) + opt_.settle);

  const auto window_start = now_;
  counting_ = true;
  run_until(window_start + opt_.steady);
  counting_ = false;
  const double window = seconds(now_ - window_start);
  for (const auto& s : sites_) {
    const double b = static_cast<double>(s->bytes) / window;
    report.bytes_per_s_mean += b / static_cast<double>(opt_.sites);
    report.bytes_per_s_max = std::max(report.bytes_per_s_max, b);
    report.heartbeat_bytes_per_s_mean += static_cast<double>(s->heartbeat_bytes) / window / static_cast<double>(opt_.sites);
    report.members_bytes_per_s_mean += static_cast<double>(s->members_bytes) / window / static_cast<double>(opt_.sites);
    report.messages_per_s_mean += static_cast<double>(s->messages) / window / static_cast<double>(opt_.sites);
    report.driver_cpu_share_mean += std::chrono::duration<double>(s->driver_time).count() / window / static_cast<double>(opt_.sites);
  }
  report.largest_member_list_bytes = largest_members_;

  if (opt_.crash_fraction > 0) {
    const auto k = std::clamp<std::size_t>(
        static_cast<std::size_t>(std::llround(opt_.crash_fraction * static_cast<double>(opt_.sites))), 1, opt_.sites - 1);
    std::vector<std::size_t> order(opt_.sites);
    for (std::size_t i = 0; i < opt_.sites; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    for (std::size_t i = 0; i < k; ++i) {
      crashed_.insert(order[i]);
      sites_[order[i]]->crashed = true;
      report.crashed.push_back(names_[order[i]]);
    }
    std::sort(report.crashed.begin(), report.crashed.end());
    crash_at_ = now_;
    // A live site may hold such a view already only if it had declared a crashed site dead before.
    for (std::size_t i = 0; i < opt_.sites; ++i)
      if (!sites_[i]->crashed) views_changed(i);
    run_until(*crash_at_ + opt_.after_crash);

    std::vector<double> times;
    for (std::size_t o = 0; o < opt_.sites; ++o) {
      if (crashed_.contains(o)) continue;
      for (std::size_t c : crashed_) {
        auto it = detected_.find({o, c});
        if (it == detected_.end()) ++report.detections_missing;
        else times.push_back(seconds(it->second - *crash_at_));
      }
    }
    if (!times.empty()) {
      auto us = [](double s) { return microseconds(std::llround(s * 1e6)); };
      double sum = 0;
      for (double t : times) sum += t;
      report.detect_first = us(*std::min_element(times.begin(), times.end()));
      report.detect_last = us(*std::max_element(times.begin(), times.end()));
      report.detect_mean = us(sum / static_cast<double>(times.size()));
    }
    if (new_view_done_) {
      report.new_view_everywhere = std::chrono::duration_cast<microseconds>(*new_view_done_ - *crash_at_);
      report.crash_view_id = crash_view_id_;
    }
  }

  report.false_deaths = false_deaths_;
  for (std::size_t i = 0; i < opt_.sites; ++i) {
    const Site& s = *sites_[i];
    if (!s.driver) continue;
    report.refutations += s.driver->membership().incarnation() - (kIncarnation + i);
    if (!s.crashed) report.final_views.push_back(s.driver->membership().views_in_force().back());
  }
  report.simulated = std::chrono::duration_cast<microseconds>(now_ - kEpoch);
  report.messages = messages_;
  return report;
}

}  // namespace

SteadyMembershipTraffic steady_membership_traffic(std::size_t sites, std::size_t views,
                                                  const MembershipSimulationOptions& options) {
  if (sites < 2) throw error::UserError("steady membership traffic needs 2 sites at least");
  MemberListInfo list;
  std::vector<std::string> all;
  for (std::size_t i = 0; i < sites; ++i) {
    all.push_back(site_name(i, sites));
    list.members.push_back({all.back(), site_address(i), options.wan.region_name(options.wan.region_of_site(i)),
                            kIncarnation + i, MemberState::kAlive});
  }
  for (std::size_t v = 1; v <= views; ++v) list.views.push_back(View::of(all, v, 8 * v));
  // A heartbeat a minute into the run, echoing one from a quarter interval before, with a measured
  // round trip: the fields a live member's heartbeat carries.
  const auto sent = static_cast<std::uint64_t>(
      std::chrono::duration_cast<microseconds>((kEpoch + std::chrono::minutes(1)).time_since_epoch()).count());
  const HeartbeatInfo hb{kIncarnation + sites - 1, 0, sent, sent - 100'000, 125'000, 180'000, 0};
  // Message ids past 2^21, as a site's are after some minutes.
  constexpr std::uint64_t kMessageId = 1u << 22;
  SteadyMembershipTraffic out;
  out.heartbeat_bytes = wire_bytes(MessageKind::kHeartbeat, encode_heartbeat(hb), kMessageId);
  out.member_list_bytes = wire_bytes(MessageKind::kMembers, encode_members(list), kMessageId);
  out.bytes_per_s = static_cast<double>((sites - 1) * out.heartbeat_bytes + out.member_list_bytes) /
                    std::chrono::duration<double>(options.heartbeat_interval).count();
  return out;
}

MembershipSimulationReport simulate_membership(const MembershipSimulationOptions& options) {
  return Simulation(options).run();
}

}  // namespace meridian::peer

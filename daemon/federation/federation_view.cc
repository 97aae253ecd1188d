#include "daemon/federation/federation_view.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace meridian::daemon {
namespace {

constexpr std::array<std::string_view, 4> kStates = {"joining", "training", "leaving", "stopped"};

std::string number_text(std::optional<double> v) {
  if (!v) return "-";
  if (std::isnan(*v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

// Reads "KEY=" then a value up to the next space (or the end) from `text` at `pos`.
std::optional<std::string_view> field(std::string_view text, std::size_t& pos, std::string_view key) {
  if (text.substr(pos, key.size()) != key || pos + key.size() >= text.size() || text[pos + key.size()] != '=')
    return std::nullopt;
  const std::size_t start = pos + key.size() + 1;
  std::size_t end = text.find(' ', start);
  if (end == std::string_view::npos) end = text.size();
  if (end + 1 == text.size()) return std::nullopt;  // a trailing space
  pos = end == text.size() ? end : end + 1;
  if (end == start) return std::nullopt;
  return text.substr(start, end - start);
}

std::optional<std::uint64_t> whole(std::optional<std::string_view> v) {
  if (!v) return std::nullopt;
  std::uint64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) return std::nullopt;
  return out;
}

// nullopt: malformed; a present nullopt: "-".
std::optional<std::optional<double>> measured(std::optional<std::string_view> v) {
  if (!v) return std::nullopt;
  if (*v == "-") return std::optional<double>();
  double out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) return std::nullopt;
  return std::optional<double>(out);
}

}  // namespace

std::string encode_summary(const SiteRow& r) {
  return "summary state=" + r.state + " step=" + std::to_string(r.step) + " epoch=" + std::to_string(r.epoch) +
         " loss=" + number_text(r.train_loss) + " acc=" + number_text(r.test_accuracy) +
         " sps=" + number_text(r.samples_per_second) + " w=" + number_text(r.push_sum_weight) +
         " stale=" + std::to_string(r.staleness);
}

std::optional<SiteRow> decode_summary(std::string_view body) {
  constexpr std::string_view head = "summary ";
  if (!body.starts_with(head)) return std::nullopt;
  std::size_t pos = head.size();
  SiteRow r;
  const auto state = field(body, pos, "state");
  if (!state || std::find(kStates.begin(), kStates.end(), *state) == kStates.end()) return std::nullopt;
  r.state = std::string(*state);
  const auto step = whole(field(body, pos, "step"));
  const auto epoch = whole(field(body, pos, "epoch"));
  const auto loss = measured(field(body, pos, "loss"));
  const auto accuracy = measured(field(body, pos, "acc"));
  const auto rate = measured(field(body, pos, "sps"));
  const auto weight = measured(field(body, pos, "w"));
  const auto stale = whole(field(body, pos, "stale"));
  if (!step || !epoch || !loss || !accuracy || !rate || !weight || !*weight || !stale || pos != body.size())
    return std::nullopt;
  r.step = *step;
  r.epoch = *epoch;
  r.train_loss = *loss;
  r.test_accuracy = *accuracy;
  r.samples_per_second = *rate;
  r.push_sum_weight = **weight;
  r.staleness = *stale;
  return r;
}

peer::Message summary_message(const SiteRow& row) {
  peer::Message m;
  m.kind = peer::MessageKind::kControl;
  m.tag = kSummaryTag;
  m.body = encode_summary(row);
  return m;
}

FederationView::FederationView(std::string self, Clock::time_point origin) : self_(std::move(self)), origin_(origin) {}

void FederationView::record(Site& site, const SiteRow& row, Clock::time_point now) {
  site.row.state = row.state;
  site.row.step = row.step;
  site.row.epoch = row.epoch;
  site.row.train_loss = row.train_loss;
  site.row.test_accuracy = row.test_accuracy;
  site.row.samples_per_second = row.samples_per_second;
  site.row.push_sum_weight = row.push_sum_weight;
  site.row.staleness = row.staleness;
  site.heard = now;
  site.dead = false;
  if (!row.train_loss && !row.test_accuracy) return;
  const double t = std::chrono::duration<double>(now - origin_).count();
  if (!site.curve.empty() && t - site.curve.back().seconds < site.curve_spacing) return;
  site.curve.push_back(CurvePoint{t, row.train_loss, row.test_accuracy});
  if (site.curve.size() > kCurvePoints) {
    // Every other point goes, the newest stays: the curve keeps spanning the run at half the detail.
    std::vector<CurvePoint> thinned;
    thinned.reserve(kCurvePoints / 2 + 1);
    for (std::size_t i = site.curve.size() % 2 == 0 ? 1 : 0; i < site.curve.size(); i += 2)
      thinned.push_back(site.curve[i]);
    site.curve = std::move(thinned);
    site.curve_spacing *= 2;
  }
}

bool FederationView::note(const peer::Message& msg, Clock::time_point now) {
  if (msg.kind != peer::MessageKind::kControl || msg.tag != kSummaryTag || msg.from == self_) return false;
  const auto row = decode_summary(msg.body);
  if (!row) return false;
  std::lock_guard lock(mu_);
  record(sites_[msg.from], *row, now);
  return true;
}

void FederationView::note_self(const SiteRow& row, Clock::time_point now) {
  std::lock_guard lock(mu_);
  record(sites_[self_], row, now);
}

void FederationView::keep_only(const std::vector<std::string>& members, const std::vector<std::string>& dead) {
  std::lock_guard lock(mu_);
  for (auto it = sites_.begin(); it != sites_.end();) {
    const bool kept = it->first == self_ || std::find(members.begin(), members.end(), it->first) != members.end();
    it = kept ? std::next(it) : sites_.erase(it);
  }
  for (const auto& name : members) {
    auto& site = sites_[name];
    site.dead = std::find(dead.begin(), dead.end(), name) != dead.end();
  }
}

std::vector<SiteRow> FederationView::rows(Clock::time_point now) const {
  std::vector<SiteRow> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, site] : sites_) {
    SiteRow r = site.row;
    r.site = name;
    r.self = name == self_;
    if (!site.heard) r.state = "unheard";
    else if (site.dead && !r.self) r.state = "dead";
    if (r.self) r.last_heard_seconds = 0.0;
    else if (site.heard) r.last_heard_seconds = std::chrono::duration<double>(now - *site.heard).count();
    out.push_back(std::move(r));
  }
  std::stable_partition(out.begin(), out.end(), [](const SiteRow& r) { return r.self; });
  return out;
}

std::map<std::string, std::vector<CurvePoint>> FederationView::curves() const {
  std::map<std::string, std::vector<CurvePoint>> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, site] : sites_) out[name] = site.curve;
  return out;
}

}  // namespace meridian::daemon

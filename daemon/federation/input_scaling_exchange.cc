#include "daemon/federation/input_scaling_exchange.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace meridian::daemon {
namespace {

void append_number(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, " %a", v);
  out += buf;
}

// Reads the whitespace-separated words of a body, each as an unsigned count or a finite double.
class Words {
 public:
  explicit Words(const std::string& body) : text_(body) {}
  bool word(std::string_view expected) {
    skip();
    if (!text_.substr(at_).starts_with(expected)) return false;
    at_ += expected.size();
    return at_ == text_.size() || text_[at_] == ' ';
  }
  std::optional<std::uint64_t> count() {
    skip();
    std::uint64_t v = 0;
    const char* begin = text_.data() + at_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), v);
    if (ec != std::errc() || end == begin) return std::nullopt;
    at_ += static_cast<std::size_t>(end - begin);
    return v;
  }
  std::optional<double> number() {
    skip();
    const std::size_t stop = std::min(text_.find(' ', at_), text_.size());
    if (stop == at_) return std::nullopt;
    const std::string word(text_.substr(at_, stop - at_));
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    if (end != word.c_str() + word.size() || !std::isfinite(v)) return std::nullopt;
    at_ = stop;
    return v;
  }
  bool done() {
    skip();
    return at_ == text_.size();
  }

 private:
  void skip() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  std::string_view text_;
  std::size_t at_ = 0;
};

// At most this many groups or features: a body is a few hundred kilobytes at most (3 × 224 × 224 pixels
// would be 150528 features).
constexpr std::uint64_t kMaxValues = std::uint64_t{1} << 20;

peer::Message control(std::uint32_t tag, std::string body) {
  peer::Message m;
  m.kind = peer::MessageKind::kControl;
  m.tag = tag;
  m.body = std::move(body);
  return m;
}

}  // namespace

std::string encode_moments(const models::data::FeatureMoments& moments) {
  std::string out = "moments " + std::to_string(moments.count) + ' ' + std::to_string(moments.sum.size());
  for (std::size_t g = 0; g < moments.sum.size(); ++g) {
    append_number(out, moments.sum[g]);
    append_number(out, g < moments.squared_deviations.size() ? moments.squared_deviations[g] : 0.0);
  }
  if (!moments.missing.empty()) {
    out += " missing";
    for (std::size_t g = 0; g < moments.sum.size(); ++g)
      out += ' ' + std::to_string(g < moments.missing.size() ? moments.missing[g] : 0);
  }
  return out;
}

std::optional<models::data::FeatureMoments> decode_moments(const std::string& body) {
  Words w(body);
  if (!w.word("moments")) return std::nullopt;
  const auto count = w.count();
  const auto groups = w.count();
  if (!count || !groups || *groups > kMaxValues) return std::nullopt;
  models::data::FeatureMoments m;
  m.count = *count;
  for (std::uint64_t g = 0; g < *groups; ++g) {
    const auto sum = w.number();
    const auto m2 = w.number();
    if (!sum || !m2 || *m2 < 0) return std::nullopt;
    m.sum.push_back(*sum);
    m.squared_deviations.push_back(*m2);
  }
  if (w.done()) return m;
  if (!w.word("missing")) return std::nullopt;
  for (std::uint64_t g = 0; g < *groups; ++g) {
    const auto missing = w.count();
    if (!missing || *missing > m.count) return std::nullopt;
    m.missing.push_back(*missing);
  }
  if (!w.done()) return std::nullopt;
  return m;
}

std::string encode_scaling(const models::data::Standardization& scaling) {
  std::string out = "scaling " + std::to_string(scaling.mean.size());
  for (std::size_t f = 0; f < scaling.mean.size(); ++f) {
    append_number(out, scaling.mean[f]);
    append_number(out, f < scaling.stddev.size() ? scaling.stddev[f] : 1.0);
  }
  return out;
}

std::optional<models::data::Standardization> decode_scaling(const std::string& body) {
  Words w(body);
  if (!w.word("scaling")) return std::nullopt;
  const auto width = w.count();
  if (!width || *width == 0 || *width > kMaxValues) return std::nullopt;
  models::data::Standardization s;
  for (std::uint64_t f = 0; f < *width; ++f) {
    const auto mean = w.number();
    const auto stddev = w.number();
    // Floats were sent: a value outside float's range, or a spread that is not positive, is not one.
    if (!mean || !stddev || std::abs(*mean) > 3.4e38 || !(*stddev > 0) || *stddev > 3.4e38) return std::nullopt;
    s.mean.push_back(static_cast<float>(*mean));
    s.stddev.push_back(static_cast<float>(*stddev));
    if (!(s.stddev.back() > 0.0f)) return std::nullopt;
  }
  if (!w.done()) return std::nullopt;
  return s;
}

peer::Message moments_message(const models::data::FeatureMoments& moments) {
  return control(kMomentsTag, encode_moments(moments));
}

peer::Message scaling_message(const models::data::Standardization& scaling) {
  return control(kScalingTag, encode_scaling(scaling));
}

ScalingExchange::Noted ScalingExchange::note(const peer::Message& msg) {
  Noted out;
  if (msg.kind != peer::MessageKind::kControl) return out;
  if (msg.tag == kMomentsTag) {
    auto moments = decode_moments(msg.body);
    if (!moments) return out;
    out.recognized = true;
    std::lock_guard lock(mu_);
    moments_[msg.from] = std::move(*moments);
    if (agreed_) out.reply = scaling_message(*agreed_);
  } else if (msg.tag == kScalingTag) {
    auto scaling = decode_scaling(msg.body);
    if (!scaling) return out;
    out.recognized = true;
    std::lock_guard lock(mu_);
    heard_ = std::move(*scaling);
  }
  return out;
}

std::map<std::string, models::data::FeatureMoments> ScalingExchange::moments() const {
  std::lock_guard lock(mu_);
  return moments_;
}

std::optional<models::data::Standardization> ScalingExchange::heard_scaling() const {
  std::lock_guard lock(mu_);
  return heard_;
}

void ScalingExchange::agree(models::data::Standardization scaling) {
  std::lock_guard lock(mu_);
  agreed_ = std::move(scaling);
}

}  // namespace meridian::daemon

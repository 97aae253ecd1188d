#include "models/data/normalization_spec.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "error/error.h"

namespace meridian::models::data {
namespace {

std::vector<double> parse_numbers(std::string_view option, std::string_view text) {
  std::vector<double> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string item(text.substr(start, end - start));
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())) != 0) item.pop_back();
    std::size_t skip = 0;
    while (skip < item.size() && std::isspace(static_cast<unsigned char>(item[skip])) != 0) ++skip;
    item.erase(0, skip);
    char* stop = nullptr;
    const double v = item.empty() ? 0.0 : std::strtod(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size() || !std::isfinite(v)) {
      throw error::UserError("--" + std::string(option) + " '" + std::string(text) + "': value " +
                             std::to_string(out.size() + 1) + " ('" + item +
                             "') is not a number (expected numbers separated by commas, e.g. 0.5,0.25)");
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

// Shortest text that reads back as the same double.
std::string number(double v) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string list(const std::vector<double>& values) {
  std::string out;
  for (const double v : values) {
    if (!out.empty()) out += ", ";
    out += number(v);
  }
  return out;
}

}  // namespace

NormalizationSpec parse_normalization_spec(std::string_view normalize, std::string_view mean, std::string_view stddev) {
  NormalizationSpec spec;
  if (normalize == "auto") {
    spec.source = NormalizationSource::kAuto;
  } else if (normalize == "federation") {
    spec.source = NormalizationSource::kFederation;
  } else if (normalize == "none") {
    spec.source = NormalizationSource::kNone;
  } else {
    throw error::UserError("'" + std::string(normalize) + "' is not auto, federation or none");
  }
  if (mean.empty() != stddev.empty()) {
    throw error::UserError(std::string(mean.empty() ? "--input-std is given without --input-mean"
                                                    : "--input-mean is given without --input-std") +
                           ": give both, one value per feature or channel");
  }
  if (mean.empty()) return spec;
  if (spec.source != NormalizationSource::kAuto) {
    throw error::UserError("--input-mean and --input-std give the normalization; --normalize " +
                           std::string(normalize) + " asks for another: leave --normalize out");
  }
  spec.source = NormalizationSource::kGiven;
  spec.mean = parse_numbers("input-mean", mean);
  spec.stddev = parse_numbers("input-std", stddev);
  if (spec.mean.size() != spec.stddev.size()) {
    throw error::UserError("--input-mean has " + std::to_string(spec.mean.size()) + " values, --input-std " +
                           std::to_string(spec.stddev.size()) + ": give one of each per feature or channel");
  }
  for (std::size_t i = 0; i < spec.stddev.size(); ++i) {
    if (!(spec.stddev[i] > 0.0)) {
      throw error::UserError("--input-std '" + std::string(stddev) + "': value " + std::to_string(i + 1) + " is " +
                             number(spec.stddev[i]) + " (standard deviations must be positive)");
    }
  }
  return spec;
}

NormalizationSource normalization_source(const NormalizationSpec& spec, const Dataset& data) {
  if (spec.source != NormalizationSource::kAuto) return spec.source;
  return data.channels > 0 ? NormalizationSource::kNone : NormalizationSource::kFederation;
}

std::string describe_normalization(const NormalizationSpec& spec, const Dataset& data) {
  const char* per = data.channels > 0 ? "per channel" : "per feature";
  switch (normalization_source(spec, data)) {
    case NormalizationSource::kNone: return "none";
    case NormalizationSource::kFederation: return std::string("from the federation, ") + per;
    case NormalizationSource::kGiven:
      return std::string("given, ") + per + ": mean " + list(spec.mean) + "; std " + list(spec.stddev);
    case NormalizationSource::kAuto: break;
  }
  return "?";
}

}  // namespace meridian::models::data

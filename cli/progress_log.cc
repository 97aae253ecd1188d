#include "cli/progress_log.h"

#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

namespace meridian::cli {
namespace {

using nlohmann::json;

const json& field(const json& object, const char* name, const std::string& source) {
  const auto it = object.find(name);
  if (it == object.end()) throw ProgressLogError(source + ": missing field \"" + name + "\"");
  return *it;
}

double number(const json& object, const char* name, const std::string& source) {
  const json& v = field(object, name, source);
  if (!v.is_number()) throw ProgressLogError(source + ": \"" + name + "\" is not a number: " + v.dump());
  return v.get<double>();
}

std::uint64_t count(const json& object, const char* name, const std::string& source) {
  const json& v = field(object, name, source);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw ProgressLogError(source + ": \"" + name + "\" is not a non-negative integer: " + v.dump());
  return v.get<std::uint64_t>();
}

}  // namespace

ProgressRecord parse_progress_record(std::string_view line, const std::string& source) {
  const json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) throw ProgressLogError(source + ": not valid JSON: " + std::string(line.substr(0, 120)));
  if (!object.is_object()) throw ProgressLogError(source + ": not a JSON object: " + std::string(line.substr(0, 120)));
  ProgressRecord r;
  r.time = number(object, "time", source);
  const json& site = field(object, "site", source);
  if (!site.is_string()) throw ProgressLogError(source + ": \"site\" is not a string: " + site.dump());
  r.site = site.get<std::string>();
  r.step = count(object, "step", source);
  r.epoch = number(object, "epoch", source);
  // A diverged run reports NaN loss, which JSON can only carry as null.
  const json& loss = field(object, "train_loss", source);
  r.train_loss = loss.is_null() ? std::numeric_limits<double>::quiet_NaN() : number(object, "train_loss", source);
  const json& accuracy = field(object, "test_accuracy", source);
  if (!accuracy.is_null()) {
    const double a = number(object, "test_accuracy", source);
    if (!(a >= 0 && a <= 1))
      throw ProgressLogError(source + ": \"test_accuracy\" " + accuracy.dump() + " is outside [0, 1]");
    r.test_accuracy = a;
  }
  r.bytes_sent = count(object, "bytes_sent", source);
  r.bytes_received = count(object, "bytes_received", source);
  // Written since 2026-11-25; older trails lack it.
  if (object.contains("eval_seconds")) r.eval_seconds = number(object, "eval_seconds", source);
  return r;
}

std::vector<ProgressRecord> ProgressLogFollower::read_new() {
  std::vector<ProgressRecord> out;
  std::ifstream in(file_, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t start = 0;
  for (std::size_t end; (end = chunk.find('\n', start)) != std::string::npos; start = end + 1) {
    ++lines_read_;
    const std::string_view line(chunk.data() + start, end - start);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    out.push_back(parse_progress_record(line, file_.string() + " line " + std::to_string(lines_read_)));
  }
  offset_ += start;
  return out;
}

}  // namespace meridian::cli

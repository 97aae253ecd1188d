#include "cli/site_result.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace meridian::cli {
namespace {

using nlohmann::json;

const json& field(const json& object, const char* name, const std::string& source) {
  const auto it = object.find(name);
  if (it == object.end()) throw SiteResultError(source + ": missing field \"" + name + "\"");
  return *it;
}

double number(const json& object, const char* name, const std::string& source) {
  const json& v = field(object, name, source);
  if (!v.is_number()) throw SiteResultError(source + ": \"" + name + "\" is not a number: " + v.dump());
  return v.get<double>();
}

// Byte counters may be written as doubles by a JSON library; accept any non-negative number.
std::uint64_t count(const json& object, const char* name, const std::string& source) {
  const double v = number(object, name, source);
  if (v < 0) throw SiteResultError(source + ": \"" + name + "\" is negative");
  return static_cast<std::uint64_t>(v);
}

std::string text(const json& object, const char* name, const std::string& source) {
  const json& v = field(object, name, source);
  if (!v.is_string()) throw SiteResultError(source + ": \"" + name + "\" is not a string: " + v.dump());
  return v.get<std::string>();
}

}  // namespace

SiteResult read_site_result(const std::filesystem::path& file) {
  const std::string source = file.string();
  std::ifstream in(file);
  if (!in) throw SiteResultError(source + ": missing (the site did not finish normally)");
  std::stringstream content;
  content << in.rdbuf();
  const json object = json::parse(content.str(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) throw SiteResultError(source + ": not a JSON object");
  SiteResult r;
  r.site = text(object, "site", source);
  r.algo = text(object, "algo", source);
  r.steps = count(object, "steps", source);
  r.epochs = number(object, "epochs", source);
  r.train_seconds = number(object, "train_seconds", source);
  r.seconds_per_step = number(object, "seconds_per_step", source);
  if (!field(object, "test_accuracy", source).is_null()) r.test_accuracy = number(object, "test_accuracy", source);
  r.bytes_sent = count(object, "bytes_sent", source);
  r.bytes_received = count(object, "bytes_received", source);
  r.rounds_abandoned = count(object, "rounds_abandoned", source);
  r.final_checkpoint = text(object, "final_checkpoint", source);
  // Written since 2026-11-25; older results lack it.
  if (object.contains("train_start")) r.train_start = number(object, "train_start", source);
  // Written since 2026-11-26, when a stopped site began to write its result too; older results are
  // of runs that completed.
  if (object.contains("completed")) {
    const json& v = object["completed"];
    if (!v.is_boolean()) throw SiteResultError(source + ": \"completed\" is not true or false: " + v.dump());
    r.completed = v.get<bool>();
  }
  return r;
}

}  // namespace meridian::cli

#include "daemon/algorithms/algorithm_option.h"

#include <charconv>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "error/error.h"

namespace meridian::daemon::algorithms {
namespace {

// Whole-string number parsing, as the shared options' grammars do it.
template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<OptionValue> parse_option_value(const AlgorithmOption& option, std::string_view text) {
  if (option.takes_auto && text == "auto") return OptionValue{kAutoOptionValue};
  if (option.is_whole()) {
    if (const auto n = parse_number<int>(text)) return OptionValue{*n};
    return std::nullopt;
  }
  if (const auto x = parse_number<double>(text)) return OptionValue{*x};
  return std::nullopt;
}

std::string option_value_text(const AlgorithmOption& option, const OptionValue& value) {
  if (option.takes_auto && value == OptionValue{kAutoOptionValue}) return "auto";
  if (const int* whole = std::get_if<int>(&value)) return std::to_string(*whole);
  char text[32];
  std::snprintf(text, sizeof text, "%g", std::get<double>(value));
  return text;
}

std::string_view option_type_words(const AlgorithmOption& option) {
  if (option.takes_auto) return "whole number or auto";
  return option.is_whole() ? "whole number" : "number";
}

void warn_renamed_option(std::string_view old_name, const AlgorithmOption& replacement, std::string_view readers) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> warned;
  {
    std::lock_guard lock(mu);
    if (!warned.emplace(old_name).second) return;
  }
  const std::string text = "warning: --" + std::string(old_name) + " is deprecated for " + std::string(readers) +
                           ", and will stop applying to them in the next release: use --" +
                           std::string(replacement.name) + "\n";
  std::fputs(text.c_str(), stderr);
}

const OptionValue& OptionValues::get(const AlgorithmOption& option) const {
  const auto it = values_.find(&option);
  return it == values_.end() ? option.default_value : it->second;
}

int OptionValues::whole(const AlgorithmOption& option) const {
  error::enforce(option.is_whole(), "option --" + std::string(option.name) + " is not a whole number");
  return std::get<int>(get(option));
}

double OptionValues::real(const AlgorithmOption& option) const {
  error::enforce(!option.is_whole(), "option --" + std::string(option.name) + " is not a real number");
  return std::get<double>(get(option));
}

void OptionValues::set(const AlgorithmOption& option, OptionValue value) {
  if (!option.is_whole() && std::holds_alternative<int>(value)) value = static_cast<double>(std::get<int>(value));
  error::enforce(value.index() == option.default_value.index(),
                 "option --" + std::string(option.name) + " takes a whole number, not a real one");
  // The default is stored as nothing, so that equal configurations compare equal.
  if (value == option.default_value) {
    values_.erase(&option);
  } else {
    values_[&option] = value;
  }
}

}  // namespace meridian::daemon::algorithms

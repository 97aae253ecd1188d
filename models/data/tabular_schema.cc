#include "models/data/tabular_schema.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "error/error.h"

namespace meridian::models::data {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

// `text` split at `separator`, each part trimmed; an empty text gives no part.
std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  if (trimmed(text).empty()) return parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(separator, start), text.size());
    parts.emplace_back(trimmed(text.substr(start, end - start)));
    start = end + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

bool is_missing_value(std::string_view field) {
  static constexpr std::array<std::string_view, 7> kSpellings = {"", "na", "n/a", "nan", "null", "none", "?"};
  field = trimmed(field);
  return std::any_of(kSpellings.begin(), kSpellings.end(), [&](std::string_view spelling) {
    return spelling.size() == field.size() &&
           std::equal(spelling.begin(), spelling.end(), field.begin(), [](char lower, char c) {
             return std::tolower(static_cast<unsigned char>(c)) == lower;
           });
  });
}

std::size_t count_missing(std::span<const float> features) {
  return static_cast<std::size_t>(std::count_if(features.begin(), features.end(), [](float x) { return std::isnan(x); }));
}

TabularSpec parse_tabular_spec(std::string_view ignore, std::string_view categorical, bool missing_indicators) {
  TabularSpec spec;
  spec.missing_indicators = missing_indicators;
  for (auto& name : split(ignore, ',')) {
    if (name.empty()) {
      throw error::UserError("--ignore-columns '" + std::string(ignore) +
                             "': a column has no name (expected names separated by commas, e.g. id,mrn)");
    }
    if (std::find(spec.ignore.begin(), spec.ignore.end(), name) != spec.ignore.end())
      throw error::UserError("--ignore-columns '" + std::string(ignore) + "': '" + name + "' is given twice");
    spec.ignore.push_back(std::move(name));
  }
  for (const auto& item : split(categorical, ',')) {
    CategoryColumn column;
    const auto eq = item.find('=');
    column.name = std::string(trimmed(std::string_view(item).substr(0, eq)));
    if (column.name.empty()) {
      throw error::UserError("--categorical '" + std::string(categorical) +
                             "': a column has no name (expected e.g. sex,ward or sex,ward=icu|medicine|surgery)");
    }
    if (eq != std::string::npos) {
      column.categories = split(std::string_view(item).substr(eq + 1), '|');
      for (std::size_t i = 0; i < column.categories.size(); ++i) {
        const auto& c = column.categories[i];
        if (c.empty()) {
          throw error::UserError("--categorical '" + std::string(categorical) + "': column '" + column.name +
                                 "' has an empty category (expected categories separated by '|', e.g. " +
                                 column.name + "=a|b|c)");
        }
        if (std::find(column.categories.begin(), column.categories.begin() + static_cast<std::ptrdiff_t>(i), c) !=
            column.categories.begin() + static_cast<std::ptrdiff_t>(i)) {
          throw error::UserError("--categorical '" + std::string(categorical) + "': column '" + column.name +
                                 "' lists category '" + c + "' twice");
        }
      }
      if (column.categories.empty()) {
        throw error::UserError("--categorical '" + std::string(categorical) + "': column '" + column.name +
                               "' has '=' but no category after it (e.g. " + column.name + "=a|b|c)");
      }
    }
    const bool twice = std::any_of(spec.categorical.begin(), spec.categorical.end(),
                                   [&](const CategoryColumn& c) { return c.name == column.name; });
    if (twice) {
      throw error::UserError("--categorical '" + std::string(categorical) + "': '" + column.name +
                             "' is given twice");
    }
    if (std::find(spec.ignore.begin(), spec.ignore.end(), column.name) != spec.ignore.end()) {
      throw error::UserError("--categorical: '" + column.name +
                             "' is also in --ignore-columns: a column is either ignored or used as categories");
    }
    spec.categorical.push_back(std::move(column));
  }
  return spec;
}

std::size_t TableSchema::width() const {
  std::size_t n = numeric.size() * (missing_indicators ? 2 : 1);
  for (const auto& c : categorical) n += c.categories.size();
  return n;
}

std::vector<std::string> TableSchema::feature_names() const {
  std::vector<std::string> names = numeric;
  if (missing_indicators)
    for (const auto& n : numeric) names.push_back(n + " missing");
  for (const auto& c : categorical)
    for (const auto& category : c.categories) names.push_back(c.name + "=" + category);
  return names;
}

std::string TableSchema::describe_categories() const {
  std::string out;
  for (const auto& c : categorical) out += (out.empty() ? "" : "; ") + c.name + ": " + join(c.categories, ", ");
  return out;
}

}  // namespace meridian::models::data

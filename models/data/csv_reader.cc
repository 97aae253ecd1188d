#include "models/data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string_view>

#include "models/checked_size.h"
#include "models/data/compressed_file.h"

namespace meridian::models::data {

namespace {

struct Record {
  std::size_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

std::string read_all(const std::string& path) {
  CompressedFile file(path);
  std::string text;
  std::string chunk(1 << 16, '\0');
  while (true) {
    const std::size_t got = file.read(chunk.data(), chunk.size());
    text.append(chunk, 0, got);
    if (got < chunk.size()) break;
  }
  return text;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// Splits the text into records: RFC 4180 quoting (a quoted field may hold the delimiter, a line
// break, and "" for a quote), LF or CRLF line ends. Unquoted fields are trimmed; blank lines dropped.
std::vector<Record> split_records(const std::string& path, std::string_view text, char delimiter) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<Record> records;
  std::size_t line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    Record rec;
    rec.line = line;
    std::string field;
    bool quoted = false;  // the current field was quoted: keep it verbatim
    bool any_content = false;
    bool end_of_record = false;
    while (i < text.size() && !end_of_record) {
      const char c = text[i];
      if (c == '"' && trim(field).empty() && !quoted) {
        quoted = true;
        any_content = true;
        field.clear();
        const std::size_t open_line = line;
        ++i;
        while (true) {
          if (i >= text.size()) {
            throw DataError(path + ": line " + std::to_string(open_line) + ": quoted field is never closed");
          }
          if (text[i] == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          field += text[i++];
        }
        continue;
      }
      if (c == delimiter) {
        rec.fields.push_back(quoted ? field : std::string(trim(field)));
        field.clear();
        quoted = false;
        any_content = true;
        ++i;
      } else if (c == '\n' || c == '\r') {
        end_of_record = true;
        i += (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
        ++line;
      } else {
        if (quoted) {
          if (c != ' ' && c != '\t') {
            throw DataError(path + ": line " + std::to_string(line) + ": text after a closing quote");
          }
        } else {
          field += c;
          if (c != ' ' && c != '\t') any_content = true;
        }
        ++i;
      }
    }
    if (!any_content) continue;  // blank line
    rec.fields.push_back(quoted ? field : std::string(trim(field)));
    records.push_back(std::move(rec));
  }
  return records;
}

std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (s.starts_with('+')) s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string quote_for_message(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string out = "'";
  out += s.size() > kMax ? std::string(s.substr(0, kMax)) + "..." : std::string(s);
  return out + "'";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Classes in numeric order when every label is a number (so "2" < "10" and labels already coded
// 0..k-1 keep their codes), otherwise in text order.
std::vector<std::string> derive_class_names(const std::vector<std::string>& labels) {
  std::vector<std::string> names(labels.begin(), labels.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const bool numeric = std::all_of(names.begin(), names.end(), [](const std::string& s) {
    const auto v = parse_number(s);
    return v && std::isfinite(*v);
  });
  if (numeric) {
    std::stable_sort(names.begin(), names.end(),
                     [](const std::string& a, const std::string& b) { return *parse_number(a) < *parse_number(b); });
  }
  return names;
}

}  // namespace

Dataset read_csv(const std::string& path, const CsvOptions& options) {
  const std::vector<Record> records = split_records(path, read_all(path), options.delimiter);
  if (records.empty()) throw DataError(path + ": no data rows (the file is empty)");

  std::size_t first_data = 0;
  std::vector<std::string> column_names;
  if (options.header) {
    column_names = records[0].fields;
    first_data = 1;
  }
  const std::size_t columns = records[0].fields.size();
  if (records.size() <= first_data) throw DataError(path + ": no data rows (only a header line)");
  if (columns < 2) {
    throw DataError(path + ": no feature column (line " + std::to_string(records[0].line) + " has " +
                    std::to_string(columns) + " field; a label and at least one feature are needed)");
  }

  std::size_t label_col = columns - 1;
  if (!options.label_column.empty()) {
    if (!options.header) {
      throw DataError(path + ": label column '" + options.label_column +
                      "' is given by name but the file is read without a header line");
    }
    const auto it = std::find(column_names.begin(), column_names.end(), options.label_column);
    if (it == column_names.end()) {
      throw DataError(path + ": no label column '" + options.label_column +
                      "' in the header (columns: " + join(column_names) + ")");
    }
    label_col = static_cast<std::size_t>(it - column_names.begin());
  } else if (options.label_index) {
    if (*options.label_index >= columns) {
      throw DataError(path + ": label column index " + std::to_string(*options.label_index) +
                      " is out of range (the file has " + std::to_string(columns) + " columns, 0.." +
                      std::to_string(columns - 1) + ")");
    }
    label_col = *options.label_index;
  }

  Dataset d;
  d.dim = columns - 1;
  d.rows = records.size() - first_data;
  d.features.reserve(d.rows * d.dim);
  std::vector<std::string> label_text;
  label_text.reserve(d.rows);
  for (std::size_t r = first_data; r < records.size(); ++r) {
    const Record& rec = records[r];
    if (rec.fields.size() != columns) {
      throw DataError(path + ": line " + std::to_string(rec.line) + " has " + std::to_string(rec.fields.size()) +
                      " fields, expected " + std::to_string(columns) + " (as on line " +
                      std::to_string(records[0].line) + ")");
    }
    for (std::size_t c = 0; c < columns; ++c) {
      if (c == label_col) {
        label_text.push_back(rec.fields[c]);
        continue;
      }
      const auto v = parse_number(rec.fields[c]);
      if (!v || !std::isfinite(*v)) {
        // Columns are counted from 1 here, as spreadsheets and editors show them.
        const std::string column =
            "column " + std::to_string(c + 1) + (options.header ? " (" + column_names[c] + ")" : std::string());
        throw DataError(path + ": line " + std::to_string(rec.line) + ", " + column + ": " +
                        quote_for_message(rec.fields[c]) + " is not " + (v ? "a finite number" : "a number"));
      }
      d.features.push_back(static_cast<float>(*v));
    }
  }

  d.class_names = options.class_names.empty() ? derive_class_names(label_text) : options.class_names;
  d.classes = d.class_names.size();
  if (d.classes > kMaxClasses) {
    throw DataError(path + ": the label column holds " + std::to_string(d.classes) +
                    " classes, more than the limit of " + std::to_string(kMaxClasses));
  }
  std::map<std::string, std::int32_t, std::less<>> index;
  for (std::size_t k = 0; k < d.class_names.size(); ++k) index.emplace(d.class_names[k], static_cast<std::int32_t>(k));
  d.labels.resize(d.rows);
  for (std::size_t i = 0; i < d.rows; ++i) {
    const auto it = index.find(label_text[i]);
    if (it == index.end()) {
      throw DataError(path + ": line " + std::to_string(records[first_data + i].line) + ": label " +
                      quote_for_message(label_text[i]) + " is out of range (not one of the " +
                      std::to_string(d.classes) + " known classes: " + join(d.class_names) + ")");
    }
    d.labels[i] = it->second;
  }

  if (options.header) {
    for (std::size_t c = 0; c < columns; ++c)
      if (c != label_col) d.feature_names.push_back(column_names[c]);
  }
  if (!options.standardize) return d;
  if (options.standardization.empty()) {
    d.standardization = Standardization::fit(d.features, d.dim);
  } else {
    if (options.standardization.mean.size() != d.dim || options.standardization.stddev.size() != d.dim) {
      throw DataError(path + ": has " + std::to_string(d.dim) + " feature columns but the standardization given has " +
                      std::to_string(options.standardization.mean.size()));
    }
    d.standardization = options.standardization;
  }
  d.standardization.apply(d.features);
  return d;
}

}  // namespace meridian::models::data

#include "models/data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

#include "models/checked_size.h"
#include "models/data/compressed_file.h"

namespace meridian::models::data {

namespace {

// The spellings is_missing_value (tabular_schema.h) reads as a gap, as error messages name them.
constexpr const char* kMissingValueSpellings = "the empty field, NA, N/A, NaN, null, None and ?";

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

// Where each of a file's columns goes among the inputs.
struct ColumnRole {
  enum Kind { kLabel, kIgnored, kNumeric, kCategory } kind = kNumeric;
  std::size_t slot = 0;        // kNumeric: the input; kCategory: the first of its inputs
  std::size_t indicator = 0;   // kNumeric with missing indicators: the indicator's input
  const CategoryColumn* column = nullptr;  // kCategory
};

std::string column_text(std::size_t c, const std::vector<std::string>& names) {
  // Columns are counted from 1 here, as spreadsheets and editors show them.
  return "column " + std::to_string(c + 1) + (names.empty() ? std::string() : " (" + names[c] + ")");
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The schema of a file read on its own: numeric columns and category columns sorted by name, a
// category column's list as declared or, else, its values in this file (in the order classes take).
TableSchema schema_of(const std::string& path, const std::vector<Record>& records, std::size_t first_data,
                      const std::vector<std::string>& names, std::size_t label_col, const TabularSpec& spec) {
  TableSchema schema;
  schema.missing_indicators = spec.missing_indicators;
  schema.ignored = spec.ignore;
  std::sort(schema.ignored.begin(), schema.ignored.end());
  schema.label = names[label_col];
  for (std::size_t c = 0; c < names.size(); ++c) {
    if (c == label_col || contains(spec.ignore, names[c])) continue;
    const auto declared = std::find_if(spec.categorical.begin(), spec.categorical.end(),
                                       [&](const CategoryColumn& k) { return k.name == names[c]; });
    if (declared == spec.categorical.end()) {
      if (contains(schema.numeric, names[c]))
        throw DataError(path + ": the header names column '" + names[c] + "' twice");
      schema.numeric.push_back(names[c]);
      continue;
    }
    CategoryColumn column = *declared;
    if (column.categories.empty()) {
      std::vector<std::string> values;
      for (std::size_t r = first_data; r < records.size(); ++r)
        if (c < records[r].fields.size() && !is_missing_value(records[r].fields[c]))
          values.push_back(records[r].fields[c]);
      column.categories = derive_class_names(values);
    }
    schema.categorical.push_back(std::move(column));
  }
  std::sort(schema.numeric.begin(), schema.numeric.end());
  std::sort(schema.categorical.begin(), schema.categorical.end(),
            [](const CategoryColumn& a, const CategoryColumn& b) { return a.name < b.name; });
  return schema;
}

// Each file column's role under `schema`, matched by name. Throws DataError naming both files when a
// column of the schema is missing here or this file has a column the schema does not use.
std::vector<ColumnRole> roles_of(const std::string& path, const std::vector<std::string>& names,
                                 std::size_t label_col, const TableSchema& schema, const std::string& schema_from) {
  std::vector<ColumnRole> roles(names.size());
  std::vector<bool> found(schema.numeric.size() + schema.categorical.size(), false);
  std::size_t category_slot = schema.numeric.size() * (schema.missing_indicators ? 2 : 1);
  std::vector<std::size_t> category_slots;
  for (const auto& k : schema.categorical) {
    category_slots.push_back(category_slot);
    category_slot += k.categories.size();
  }
  for (std::size_t c = 0; c < names.size(); ++c) {
    ColumnRole& role = roles[c];
    if (c == label_col) {
      role.kind = ColumnRole::kLabel;
      continue;
    }
    if (contains(schema.ignored, names[c])) {
      role.kind = ColumnRole::kIgnored;
      continue;
    }
    const auto n = std::find(schema.numeric.begin(), schema.numeric.end(), names[c]);
    if (n != schema.numeric.end()) {
      const auto at = static_cast<std::size_t>(n - schema.numeric.begin());
      if (found[at]) throw DataError(path + ": the header names column '" + names[c] + "' twice");
      found[at] = true;
      role.kind = ColumnRole::kNumeric;
      role.slot = at;
      role.indicator = schema.numeric.size() + at;
      continue;
    }
    const auto k = std::find_if(schema.categorical.begin(), schema.categorical.end(),
                                [&](const CategoryColumn& col) { return col.name == names[c]; });
    if (k != schema.categorical.end()) {
      const auto at = static_cast<std::size_t>(k - schema.categorical.begin());
      if (found[schema.numeric.size() + at])
        throw DataError(path + ": the header names column '" + names[c] + "' twice");
      found[schema.numeric.size() + at] = true;
      role.kind = ColumnRole::kCategory;
      role.slot = category_slots[at];
      role.column = &*k;
      continue;
    }
    throw DataError(path + ": has column '" + names[c] + "', which " + schema_from +
                    " does not use: leave it out with --ignore-columns " + names[c] +
                    " or make the files' columns the same");
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (found[i]) continue;
    const std::string& name =
        i < schema.numeric.size() ? schema.numeric[i] : schema.categorical[i - schema.numeric.size()].name;
    throw DataError(path + ": has no column '" + name + "', which " + schema_from + " has (columns here: " +
                    join(names) + ")");
  }
  return roles;
}

std::string category_hint(const CategoryColumn& column, const std::string& value) {
  std::string list;
  for (const auto& c : column.categories) list += c + "|";
  return "--categorical " + column.name + "=" + list + value;
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
                      "' in the header (columns: " + join(column_names) + "); name it with --label-column");
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
  std::vector<ColumnRole> roles(columns);
  if (options.header) {
    for (const auto& name : options.tabular.ignore)
      if (!contains(column_names, name))
        throw DataError(path + ": --ignore-columns names '" + name + "', which is not a column (columns: " +
                        join(column_names) + ")");
    for (const auto& k : options.tabular.categorical)
      if (!contains(column_names, k.name))
        throw DataError(path + ": --categorical names '" + k.name + "', which is not a column (columns: " +
                        join(column_names) + ")");
    if (contains(options.tabular.ignore, column_names[label_col]))
      throw DataError(path + ": --ignore-columns names the label column '" + column_names[label_col] + "'");
    d.table = options.schema ? *options.schema
                             : schema_of(path, records, first_data, column_names, label_col, options.tabular);
    roles = roles_of(path, column_names, label_col, *d.table,
                     options.schema ? options.schema_from : std::string("the header"));
    d.dim = d.table->width();
    d.feature_names = d.table->feature_names();
  } else {
    if (!options.tabular.empty())
      throw DataError(path + ": --ignore-columns, --categorical and --missing-indicators need a header line");
    std::size_t slot = 0;
    for (std::size_t c = 0; c < columns; ++c) {
      roles[c].kind = c == label_col ? ColumnRole::kLabel : ColumnRole::kNumeric;
      if (c != label_col) roles[c].slot = slot++;
    }
    d.dim = columns - 1;
  }
  if (d.dim == 0) throw DataError(path + ": no feature column is left (all but the label are ignored)");
  const bool indicators = d.table && d.table->missing_indicators;
  d.rows = records.size() - first_data;
  d.features.assign(d.rows * d.dim, 0.0f);
  std::vector<std::string> label_text;
  label_text.reserve(d.rows);
  // Whether a row above held a number in each column: a text value below such rows is a stray entry in
  // a column of numbers (a gap spelled in words, a note), not a column of categories or identifiers.
  std::vector<bool> held_number(columns, false);
  for (std::size_t r = first_data; r < records.size(); ++r) {
    const Record& rec = records[r];
    if (rec.fields.size() != columns) {
      throw DataError(path + ": line " + std::to_string(rec.line) + " has " + std::to_string(rec.fields.size()) +
                      " fields, expected " + std::to_string(columns) + " (as on line " +
                      std::to_string(records[0].line) + ")");
    }
    float* row = d.features.data() + (r - first_data) * d.dim;
    for (std::size_t c = 0; c < columns; ++c) {
      const ColumnRole& role = roles[c];
      const std::string& field = rec.fields[c];
      switch (role.kind) {
        case ColumnRole::kLabel:
          if (field.empty())
            throw DataError(path + ": line " + std::to_string(rec.line) + ": the label is missing (an empty field)");
          label_text.push_back(field);
          break;
        case ColumnRole::kIgnored: break;
        case ColumnRole::kNumeric: {
          if (is_missing_value(field)) {
            // Filled when the inputs are scaled (standardization.h), with the agreed mean.
            row[role.slot] = std::numeric_limits<float>::quiet_NaN();
            if (indicators) row[role.indicator] = 1.0f;
            break;
          }
          const auto v = parse_number(field);
          if (!v || !std::isfinite(*v)) {
            std::string hint;
            if (!v && held_number[c]) {
              hint =
                  ", though the rows above hold numbers in this column: if it stands for a missing value, "
                  "write it as an empty field or NA in the file (" +
                  std::string(kMissingValueSpellings) + " are read as missing), or correct it";
            } else if (!v && options.header) {
              hint = ": if the column holds categories, declare it with --categorical " + column_names[c] +
                     "; if it is an identifier, leave it out with --ignore-columns " + column_names[c];
            }
            throw DataError(path + ": line " + std::to_string(rec.line) + ", " + column_text(c, column_names) + ": " +
                            quote_for_message(field) + " is not " + (v ? "a finite number" : "a number") + hint);
          }
          row[role.slot] = static_cast<float>(*v);
          held_number[c] = true;
          break;
        }
        case ColumnRole::kCategory: {
          if (is_missing_value(field)) break;  // no category: none of the column's inputs is set
          const auto& list = role.column->categories;
          const auto it = std::find(list.begin(), list.end(), field);
          if (it == list.end()) {
            throw DataError(path + ": line " + std::to_string(rec.line) + ", " + column_text(c, column_names) +
                            ": category " + quote_for_message(field) + " is not one of " + role.column->name +
                            "'s categories (" + join(list) + (options.schema ? ", from " + options.schema_from : "") +
                            "): declare the full list with " + category_hint(*role.column, field));
          }
          row[role.slot + static_cast<std::size_t>(it - list.begin())] = 1.0f;
          break;
        }
      }
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
      const std::string where =
          path + ": line " + std::to_string(records[first_data + i].line) + ": label " + quote_for_message(label_text[i]);
      std::string full_list;
      for (const auto& c : d.class_names) full_list += c + ",";
      full_list += label_text[i];
      if (options.classes_from.empty()) {
        throw DataError(where + " is not one of the " + std::to_string(d.classes) + " known classes (" +
                        join(d.class_names) + "): declare the full class list with --classes " + full_list);
      }
      throw DataError(where + " is not one of the " + std::to_string(d.classes) + " classes of " +
                      options.classes_from + " (" + join(d.class_names) +
                      "): if it is a class, declare the full class list with --classes " + full_list);
    }
    d.labels[i] = it->second;
  }

  if (!d.table && options.header) {
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

// How a table's columns become a model's inputs, the same on every site of a federation
// (docs/datasets.md): which columns are left out (IDs), which hold categories (one-hot encoded), and
// whether missing values get indicator columns. The operator declares it (--ignore-columns,
// --categorical, --missing-indicators: a TabularSpec); the training file completes it into a
// TableSchema (its numeric columns, the categories of a category column declared without its list);
// the federation terms compare the schemas of all sites, so every site builds the same inputs.
//
// The inputs, in this order (TableSchema::feature_names):
//   each numeric column, sorted by name                               "age", "glucose"
//   with missing indicators, one per numeric column, in that order    "age missing", "glucose missing"
//   each category column, sorted by name, one input per category      "ward=icu", "ward=surgery"
// Columns are matched by name, so files whose columns come in another order give the same inputs.
// A missing numeric value is read as NaN and filled when the inputs are scaled (standardization.h:
// with the scaling's mean, the federation's pooled mean of the values present); a missing category
// sets none of its column's inputs.
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meridian::models::data {

// Whether a table field spells a missing value: empty, NA, N/A, NaN, null, None or ? (in any case).
bool is_missing_value(std::string_view field);

// How many values of the row-major `features` are missing (NaN).
std::size_t count_missing(std::span<const float> features);

struct CategoryColumn {
  std::string name;
  // In the order of the column's one-hot inputs. In a TabularSpec, empty when the list is to come from
  // the training data (then sorted).
  std::vector<std::string> categories;
  friend bool operator==(const CategoryColumn&, const CategoryColumn&) = default;
};

// What the operator declares.
struct TabularSpec {
  std::vector<std::string> ignore;          // --ignore-columns id,mrn
  std::vector<CategoryColumn> categorical;  // --categorical sex,ward=icu|medicine|surgery
  bool missing_indicators = false;          // --missing-indicators
  bool empty() const { return ignore.empty() && categorical.empty() && !missing_indicators; }
  friend bool operator==(const TabularSpec&, const TabularSpec&) = default;
};

// Parses --ignore-columns (names separated by commas) and --categorical (names separated by commas,
// each optionally followed by '=' and its full category list separated by '|'). Throws
// error::UserError naming the option and the text: an empty name or category, a name given twice, a
// category given twice, and a column both ignored and categorical.
TabularSpec parse_tabular_spec(std::string_view ignore, std::string_view categorical, bool missing_indicators);

// The inputs a table gives, as every site of a federation must build them.
struct TableSchema {
  std::vector<std::string> numeric;         // sorted by name
  std::vector<CategoryColumn> categorical;  // sorted by name; each with its full category list
  bool missing_indicators = false;
  std::vector<std::string> ignored;  // the columns left out, sorted (a raw row may hold them)
  std::string label;                 // the label column's name

  // Inputs per row: numeric, plus as many indicators with missing_indicators, plus every category.
  std::size_t width() const;
  // The name of each input, in order (see the top of this file).
  std::vector<std::string> feature_names() const;
  // "sex: F, M; ward: icu, surgery", for the federation terms; empty without category columns.
  std::string describe_categories() const;
  friend bool operator==(const TableSchema&, const TableSchema&) = default;
};

}  // namespace meridian::models::data

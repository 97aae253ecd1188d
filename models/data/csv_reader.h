// Reader for tabular data in CSV (clinical tables and the like): one row per sample, numeric feature
// columns and one label column whose values name the classes. Features are standardized per column;
// labels are mapped to 0..classes-1. Files may be gzip-compressed (detected by the gzip magic).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/standardization.h"
#include "models/data/tabular_schema.h"

namespace meridian::models::data {

struct CsvOptions {
  // The label column: by header name when non-empty (needs header = true), else by 0-based index
  // when set, else the last column.
  std::string label_column;
  std::optional<std::size_t> label_index;
  // Whether the first non-empty line names the columns.
  bool header = true;
  char delimiter = ',';
  // The training set's statistics (Dataset::standardization of the training file). When empty, the
  // statistics are fitted on this file; when set, this file is scaled with them.
  Standardization standardization;
  // false: the features stay as read and Dataset::standardization stays empty (the caller scales them,
  // e.g. with statistics agreed over a federation); `standardization` is then ignored.
  bool standardize = true;
  // The training set's classes (Dataset::class_names of the training file). When empty, the classes
  // are the distinct label values of this file, in numeric order when all are numbers and in text
  // order otherwise; when set, a label must be one of them and maps to its position.
  std::vector<std::string> class_names;
  // Where `class_names` came from, for the message about a label outside them ("--classes", "the
  // training data train.csv"); empty: "the known classes".
  std::string classes_from;
  // Which columns are ignored or hold categories, and whether missing values get indicator columns
  // (tabular_schema.h). Needs header = true when not empty.
  TabularSpec tabular;
  // The training file's schema (Dataset::table): this file's columns are matched to it by name, a
  // column it lacks or one it does not use is refused, naming `schema_from` (the training file).
  // Unset: the schema is this file's own, from `tabular`.
  std::optional<TableSchema> schema;
  std::string schema_from;
};

// Reads `path`. Fields may be quoted ("a, b" and "" for a quote); blank lines are skipped; surrounding
// spaces are ignored; a UTF-8 byte order mark is skipped. With a header, the columns become inputs as
// tabular_schema.h says (numeric columns sorted by name, missing values as NaN, categories one-hot,
// ignored columns left out) and Dataset::table holds the schema; without one, every column but the
// label is a numeric input, in file order. The result has standardized features (statistics stored in
// Dataset::standardization, missing values filled with the mean) unless options.standardize is false,
// labels in [0, classes) with Dataset::class_names, the inputs' names in Dataset::feature_names, and
// no image geometry.
// Throws DataError naming the file, and the line and column where it applies, and the option that
// fixes it where one does: missing file, no data rows, no feature column, unknown label column, a
// declared column that is not in the header, a row whose field count differs from the first row, a
// numeric field that is not a number nor a missing value (--categorical, --ignore-columns), a category
// not in the column's list (--categorical NAME=...), a column missing or extra against `schema`, an
// unterminated quote, a label not among `class_names` (--classes), and standardization statistics
// whose width differs from the file's.
Dataset read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace meridian::models::data

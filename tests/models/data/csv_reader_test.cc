#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "models/data/csv_reader.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/support/temp_dir.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;
using meridian::tests::gzip_bytes;
using meridian::tests::TempDir;

namespace {

// Column means and population standard deviations of a row-major table.
void check_standardized(const Dataset& d) {
  for (std::size_t c = 0; c < d.dim; ++c) {
    double sum = 0, sq = 0;
    for (std::size_t r = 0; r < d.rows; ++r) sum += d.row(r)[c];
    const double mean = sum / d.rows;
    for (std::size_t r = 0; r < d.rows; ++r) sq += (d.row(r)[c] - mean) * (d.row(r)[c] - mean);
    CHECK(mean == Approx(0.0).margin(1e-6));
    CHECK(std::sqrt(sq / d.rows) == Approx(1.0).epsilon(1e-5));
  }
}

const char* const kTrain =
    "age,diagnosis,glucose\n"
    "50,benign,90\n"
    "60,malignant,110\n"
    "70,benign,100\n"
    "80,cyst,140\n";

}  // namespace

TEST_CASE("CSV reader: label column by name, standardized features, classes from the labels", "[data][csv][unit]") {
  TempDir dir;
  const bool gz = GENERATE(false, true);
  const auto path = dir.write("train.csv", gz ? gzip_bytes(kTrain) : std::string(kTrain));
  CsvOptions opt;
  opt.label_column = "diagnosis";
  const Dataset d = read_csv(path, opt);
  CHECK(d.rows == 4);
  CHECK(d.dim == 2);
  CHECK(d.classes == 3);
  CHECK(d.channels == 0);
  CHECK(d.class_names == std::vector<std::string>{"benign", "cyst", "malignant"});
  CHECK(d.labels == std::vector<std::int32_t>{0, 2, 0, 1});
  // age: mean 65, population std sqrt(125); glucose: mean 110, std sqrt(350).
  REQUIRE(d.standardization.mean.size() == 2);
  CHECK(d.standardization.mean[0] == Approx(65.0));
  CHECK(d.standardization.stddev[0] == Approx(std::sqrt(125.0)));
  CHECK(d.standardization.mean[1] == Approx(110.0));
  CHECK(d.standardization.stddev[1] == Approx(std::sqrt(350.0)));
  CHECK(d.row(0)[0] == Approx((50 - 65) / std::sqrt(125.0)));
  CHECK(d.row(3)[1] == Approx((140 - 110) / std::sqrt(350.0)));
  check_standardized(d);
}

TEST_CASE("CSV reader: a test file is scaled and labelled with the training file's statistics", "[data][csv][unit]") {
  TempDir dir;
  CsvOptions opt;
  opt.label_column = "diagnosis";
  const Dataset train = read_csv(dir.write("train.csv", kTrain), opt);
  opt.standardization = train.standardization;
  opt.class_names = train.class_names;
  // The test file has only two of the classes, in another order; labels must keep the training codes.
  const Dataset test = read_csv(dir.write("test.csv", "age,diagnosis,glucose\n65,malignant,110\n75,cyst,80\n"), opt);
  CHECK(test.classes == 3);
  CHECK(test.labels == std::vector<std::int32_t>{2, 1});
  CHECK(test.row(0)[0] == Approx(0.0).margin(1e-6));
  CHECK(test.row(0)[1] == Approx(0.0).margin(1e-6));
  CHECK(test.row(1)[0] == Approx(10 / std::sqrt(125.0)));
  CHECK(test.row(1)[1] == Approx(-30 / std::sqrt(350.0)));

  SECTION("a label the training file never had names the option that declares the full class list") {
    const auto path = dir.write("odd.csv", "age,diagnosis,glucose\n65,unknown,110\n");
    CHECK_THROWS_WITH(read_csv(path, opt),
                      Contains(path) && Contains("line 2") && Contains("'unknown'") &&
                          Contains("not one of the 3 known classes (benign, cyst, malignant)") &&
                          Contains("--classes benign,cyst,malignant,unknown"));
    opt.classes_from = "the training data train.csv";
    CHECK_THROWS_WITH(read_csv(path, opt), Contains("not one of the 3 classes of the training data train.csv") &&
                                               Contains("if it is a class, declare the full class list with --classes "
                                                        "benign,cyst,malignant,unknown"));
  }
  SECTION("statistics of another width are refused") {
    const auto path = dir.write("wide.csv", "age,diagnosis,glucose,bmi\n65,cyst,110,22\n");
    CHECK_THROWS_WITH(read_csv(path, opt), Contains(path) && Contains("3 feature columns"));
  }
}

TEST_CASE("CSV reader: no header, label by index, numeric labels in numeric order", "[data][csv][unit]") {
  TempDir dir;
  const auto path = dir.write("plain.csv", "10,1.5,7\n2,2.5,7\n10,3.5,7\n0,4.5,7\n");
  CsvOptions opt;
  opt.header = false;
  opt.label_index = 0;
  const Dataset d = read_csv(path, opt);
  CHECK(d.rows == 4);
  CHECK(d.dim == 2);
  CHECK(d.class_names == std::vector<std::string>{"0", "2", "10"});
  CHECK(d.labels == std::vector<std::int32_t>{2, 1, 2, 0});
  // The constant third column becomes 0 rather than NaN.
  for (std::size_t r = 0; r < d.rows; ++r) CHECK(d.row(r)[1] == 0.0f);
  CHECK(d.standardization.stddev[1] == 1.0f);
}

TEST_CASE("CSV reader: last column by default, quotes, CRLF, blank lines, spaces, byte order mark",
          "[data][csv][unit]") {
  TempDir dir;
  const auto path = dir.write("messy.csv",
                              "\xEF\xBB\xBF"
                              "x, \"y, in mm\" ,label\r\n"
                              "\r\n"
                              " 1 ,\"2\",\"a \"\"b\"\"\"\r\n"
                              "+3,4e0,c\r\n"
                              "\n");
  const Dataset d = read_csv(path);
  CHECK(d.rows == 2);
  CHECK(d.dim == 2);
  CHECK(d.class_names == std::vector<std::string>{"a \"b\"", "c"});
  CHECK(d.standardization.mean == std::vector<float>{2.0f, 3.0f});
}

TEST_CASE("CSV reader names the file, the line and the problem for bad input", "[data][csv][unit]") {
  TempDir dir;
  SECTION("missing file") {
    const auto p = dir.file("absent.csv");
    CHECK_THROWS_WITH(read_csv(p), Contains(p) && Contains("no such file"));
  }
  SECTION("non-numeric field") {
    const auto p = dir.write("nan.csv", "age,glucose,y\n50,90,0\n60,high,1\n");
    CHECK_THROWS_WITH(read_csv(p), Contains(p) && Contains("line 3") && Contains("column 2 (glucose)") &&
                                       Contains("'high' is not a number"));
  }
  SECTION("a stray word below numbers is named as a gap to spell or a value to correct") {
    const auto p = dir.write("stray.csv", "age,glucose,y\n50,90,0\n60,,1\n61,pending,1\n");
    CHECK_THROWS_WITH(read_csv(p), Contains("line 4, column 2 (glucose): 'pending' is not a number, though the rows "
                                            "above hold numbers in this column") &&
                                       Contains("write it as an empty field or NA") && !Contains("--categorical"));
  }
  SECTION("a category column not declared, and non-finite fields") {
    const auto sex = dir.write("sex.csv", "age,sex,y\n50,F,0\n60,M,1\n");
    CHECK_THROWS_WITH(read_csv(sex), Contains(sex) && Contains("line 2, column 2 (sex): 'F' is not a number") &&
                                         Contains("declare it with --categorical sex") &&
                                         Contains("leave it out with --ignore-columns sex"));
    const auto inf = dir.write("inf.csv", "a,y\ninf,0\n");
    CHECK_THROWS_WITH(read_csv(inf), Contains("line 2") && Contains("not a finite number"));
  }
  SECTION("inconsistent column count") {
    const auto p = dir.write("ragged.csv", "a,b,y\n1,2,0\n\n1,2,3,0\n");
    CHECK_THROWS_WITH(read_csv(p), Contains(p) && Contains("line 4 has 4 fields, expected 3"));
  }
  SECTION("unknown label column, index out of range, name without header") {
    const auto p = dir.write("t.csv", "a,b,y\n1,2,0\n");
    CsvOptions opt;
    opt.label_column = "outcome";
    CHECK_THROWS_WITH(read_csv(p, opt), Contains(p) && Contains("no label column 'outcome'") && Contains("a, b, y"));
    opt = {};
    opt.label_index = 3;
    CHECK_THROWS_WITH(read_csv(p, opt), Contains(p) && Contains("index 3 is out of range"));
    CsvOptions no_header;
    no_header.header = false;
    no_header.label_column = std::string("y");
    CHECK_THROWS_WITH(read_csv(p, no_header), Contains("without a header"));
  }
  SECTION("no rows, no features, unterminated quote") {
    const auto empty = dir.write("empty.csv", "\n\n");
    CHECK_THROWS_WITH(read_csv(empty), Contains(empty) && Contains("no data rows"));
    const auto header_only = dir.write("header.csv", "a,y\n");
    CHECK_THROWS_WITH(read_csv(header_only), Contains("only a header"));
    const auto one_column = dir.write("one.csv", "y\n1\n");
    CHECK_THROWS_WITH(read_csv(one_column), Contains("no feature column"));
    const auto quote = dir.write("quote.csv", "a,y\n\"1,0\n2,1\n");
    CHECK_THROWS_WITH(read_csv(quote), Contains(quote) && Contains("line 2") && Contains("never closed"));
  }
}

namespace {

// A table as hospitals export it: an identifier, missing values spelled three ways, a category
// column, and the label in the middle.
const char* const kMessy =
    "mrn,age,sex,diagnosis,glucose\n"
    "A-17,50,F,benign,90\n"
    "A-18,,M,malignant,NA\n"
    "A-19,70,F,benign,100\n"
    "A-20,80,,malignant,n/a\n";

}  // namespace

TEST_CASE("CSV reader: ignored, missing and category columns become the schema's inputs", "[data][csv][unit]") {
  TempDir dir;
  CsvOptions opt;
  opt.label_column = "diagnosis";
  opt.tabular = parse_tabular_spec("mrn", "sex", true);
  opt.standardize = false;
  const Dataset d = read_csv(dir.write("messy.csv", kMessy), opt);
  REQUIRE(d.table);
  CHECK(d.table->numeric == std::vector<std::string>{"age", "glucose"});
  CHECK(d.table->ignored == std::vector<std::string>{"mrn"});
  CHECK(d.table->describe_categories() == "sex: F, M");
  CHECK(d.feature_names ==
        std::vector<std::string>{"age", "glucose", "age missing", "glucose missing", "sex=F", "sex=M"});
  REQUIRE(d.dim == 6);
  // Row 2: age missing, glucose missing, sex M.
  CHECK(std::isnan(d.row(1)[0]));
  CHECK(std::isnan(d.row(1)[1]));
  CHECK(d.row(1)[2] == 1.0f);
  CHECK(d.row(1)[3] == 1.0f);
  CHECK(d.row(1)[4] == 0.0f);
  CHECK(d.row(1)[5] == 1.0f);
  // Row 4: sex missing sets neither of its inputs.
  CHECK(d.row(3)[4] == 0.0f);
  CHECK(d.row(3)[5] == 0.0f);
  CHECK(count_missing(d.features) == 3);

  SECTION("standardized, a missing value becomes the mean of the values present") {
    opt.standardize = true;
    const Dataset s = read_csv(dir.write("messy.csv", kMessy), opt);
    CHECK(s.standardization.mean[0] == Approx((50.0 + 70 + 80) / 3));
    CHECK(s.standardization.mean[1] == Approx(95.0));
    CHECK(s.row(1)[0] == 0.0f);
    CHECK(s.row(3)[1] == 0.0f);
    CHECK(count_missing(s.features) == 0);
  }
  SECTION("a test file with its columns in another order is mapped by name") {
    CsvOptions test_opt = opt;
    test_opt.schema = d.table;
    test_opt.schema_from = "messy.csv";
    test_opt.class_names = d.class_names;
    const Dataset t = read_csv(
        dir.write("test.csv", "sex,glucose,diagnosis,mrn,age\nM,120,benign,B-1,65\nF,?,malignant,B-2,NaN\n"), test_opt);
    REQUIRE(t.dim == 6);
    CHECK(t.row(0)[0] == 65.0f);
    CHECK(t.row(0)[1] == 120.0f);
    CHECK(t.row(0)[5] == 1.0f);
    CHECK(std::isnan(t.row(1)[1]));
    CHECK(t.row(1)[4] == 1.0f);
    CHECK(t.labels == std::vector<std::int32_t>{0, 1});
  }
  SECTION("a missing or extra column, or an unknown category, is refused naming both files and the fix") {
    CsvOptions test_opt = opt;
    test_opt.schema = d.table;
    test_opt.schema_from = "messy.csv";
    const auto lacking = dir.write("lacking.csv", "mrn,age,sex,diagnosis\nB,1,F,benign\n");
    CHECK_THROWS_WITH(read_csv(lacking, test_opt),
                      Contains(lacking) && Contains("has no column 'glucose', which messy.csv has"));
    const auto extra = dir.write("extra.csv", "mrn,age,sex,diagnosis,glucose,bmi\nB,1,F,benign,2,3\n");
    CHECK_THROWS_WITH(read_csv(extra, test_opt),
                      Contains(extra) && Contains("has column 'bmi', which messy.csv does not use") &&
                          Contains("--ignore-columns bmi"));
    const auto other = dir.write("other.csv", "mrn,age,sex,diagnosis,glucose\nB,1,X,benign,2\n");
    CHECK_THROWS_WITH(read_csv(other, test_opt),
                      Contains(other) && Contains("line 2, column 3 (sex): category 'X'") &&
                          Contains("from messy.csv") && Contains("--categorical sex=F|M|X"));
  }
  SECTION("a declared column the file lacks, or the label ignored, is refused") {
    CsvOptions bad = opt;
    bad.tabular = parse_tabular_spec("patient", "", false);
    CHECK_THROWS_WITH(read_csv(dir.write("messy.csv", kMessy), bad),
                      Contains("--ignore-columns names 'patient', which is not a column"));
    bad.tabular = parse_tabular_spec("mrn", "ward", false);
    CHECK_THROWS_WITH(read_csv(dir.write("messy.csv", kMessy), bad),
                      Contains("--categorical names 'ward', which is not a column"));
    bad.tabular = parse_tabular_spec("diagnosis,mrn", "", false);
    CHECK_THROWS_WITH(read_csv(dir.write("messy.csv", kMessy), bad),
                      Contains("--ignore-columns names the label column 'diagnosis'"));
  }
  SECTION("a declared category list fixes the inputs whatever values the file holds") {
    CsvOptions declared = opt;
    declared.tabular = parse_tabular_spec("mrn", "sex=M|F|X", false);
    const Dataset x = read_csv(dir.write("messy.csv", kMessy), declared);
    CHECK(x.feature_names == std::vector<std::string>{"age", "glucose", "sex=M", "sex=F", "sex=X"});
  }
}

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "error/error.h"
#include "models/data/tabular_schema.h"

using namespace meridian::models::data;
using Catch::Matchers::Contains;

TEST_CASE("missing values are recognized in their usual spellings", "[data][tabular][unit]") {
  for (const char* missing : {"", " ", "NA", "na", "N/A", "NaN", "nan", "null", "NULL", "None", "?"})
    CHECK(is_missing_value(missing));
  for (const char* present : {"0", "M", "NAB", "-", "none!", "n"}) CHECK_FALSE(is_missing_value(present));
}

TEST_CASE("the table options are parsed, with categories declared or left to the data", "[data][tabular][unit]") {
  const auto spec = parse_tabular_spec(" id , mrn", "sex, ward = icu|medicine | surgery", true);
  CHECK(spec.ignore == std::vector<std::string>{"id", "mrn"});
  REQUIRE(spec.categorical.size() == 2);
  CHECK(spec.categorical[0] == CategoryColumn{"sex", {}});
  CHECK(spec.categorical[1] == CategoryColumn{"ward", {"icu", "medicine", "surgery"}});
  CHECK(spec.missing_indicators);
  CHECK(parse_tabular_spec("", "", false).empty());
}

TEST_CASE("bad table options are refused naming the option and the text", "[data][tabular][unit]") {
  using meridian::error::UserError;
  CHECK_THROWS_WITH(parse_tabular_spec("id,,mrn", "", false), Contains("--ignore-columns 'id,,mrn'") &&
                                                                  Contains("a column has no name"));
  CHECK_THROWS_WITH(parse_tabular_spec("id,id", "", false), Contains("'id' is given twice"));
  CHECK_THROWS_WITH(parse_tabular_spec("", "sex,sex", false), Contains("'sex' is given twice"));
  CHECK_THROWS_WITH(parse_tabular_spec("", "ward=icu||x", false), Contains("column 'ward' has an empty category"));
  CHECK_THROWS_WITH(parse_tabular_spec("", "ward=icu|icu", false), Contains("lists category 'icu' twice"));
  CHECK_THROWS_WITH(parse_tabular_spec("", "=a|b", false), Contains("a column has no name"));
  CHECK_THROWS_WITH(parse_tabular_spec("sex", "sex", false), Contains("'sex' is also in --ignore-columns"));
  CHECK_THROWS_AS(parse_tabular_spec("a,", "", false), UserError);
}

TEST_CASE("a schema names its inputs: numeric, indicators, then one per category", "[data][tabular][unit]") {
  TableSchema schema;
  schema.numeric = {"age", "glucose"};
  schema.categorical = {{"sex", {"F", "M"}}, {"ward", {"icu", "surgery"}}};
  CHECK(schema.width() == 6);
  CHECK(schema.feature_names() == std::vector<std::string>{"age", "glucose", "sex=F", "sex=M", "ward=icu",
                                                           "ward=surgery"});
  schema.missing_indicators = true;
  CHECK(schema.width() == 8);
  CHECK(schema.feature_names()[2] == "age missing");
  CHECK(schema.describe_categories() == "sex: F, M; ward: icu, surgery");
}

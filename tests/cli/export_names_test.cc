// A model trained on a messy table (an ID column, missing values, category columns) and exported
// carries its column names, class names and the table preprocessing: PyTorch, given raw CSV rows as
// text, builds the inputs with the export's own preprocessing and predicts what Meridian predicts;
// the ONNX graph fills missing values itself. Real `meridian train`, `export` and `eval` processes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "models/data/data_source.h"
#include "models/data/tabular_schema.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/meridian_command.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::TempDir;
using meridian::tests::run_meridian;
using meridian::tests::run_shell;

namespace {

// Debian's interpreter, which has python3-torch and python3-onnx (scripts/install-deps test).
const std::string kPython = "/usr/bin/python3";
const std::string kTableOptions =
    "--label-column diagnosis --ignore-columns mrn --categorical 'sex,ward=icu|medicine|surgery' --missing-indicators";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

bool python_has_torch_and_onnx() {
  return std::system((kPython + " -c 'import numpy, torch, onnx' >/dev/null 2>&1").c_str()) == 0;
}

struct Row {
  std::string mrn, age, sex, ward, glucose, diagnosis;
  std::string field(const std::string& column) const {
    if (column == "mrn") return mrn;
    if (column == "age") return age;
    if (column == "sex") return sex;
    if (column == "ward") return ward;
    if (column == "glucose") return glucose;
    return diagnosis;
  }
};

void write_table(const fs::path& file, const std::vector<std::string>& header, const std::vector<Row>& rows) {
  std::ofstream out(file);
  for (std::size_t c = 0; c < header.size(); ++c) out << (c ? "," : "") << header[c];
  out << "\n";
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < header.size(); ++c) out << (c ? "," : "") << r.field(header[c]);
    out << "\n";
  }
  REQUIRE(out.good());
}

// Rows with gaps spelled as hospitals spell them; malignant with age and the surgical ward.
std::vector<Row> messy_rows(int n, int salt) {
  static const std::vector<std::string> kWards = {"icu", "medicine", "surgery"};
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    const int k = i + salt;
    Row r;
    r.mrn = "MRN-" + std::to_string(5000 + k);
    const int age = 25 + (k * 13) % 60;
    r.age = k % 7 == 3 ? (k % 2 ? "" : "NA") : std::to_string(age);
    r.sex = k % 5 == 4 ? "" : (k % 2 ? "F" : "M");
    r.ward = kWards[static_cast<std::size_t>(k) % kWards.size()];
    r.glucose = k % 6 == 1 ? "?" : std::to_string(80 + (k * 17) % 70);
    const bool malignant = (k % 7 == 3 ? 50 : age) + (r.ward == "surgery" ? 20 : 0) > 65;
    r.diagnosis = malignant ? "malignant" : "benign";
    rows.push_back(r);
  }
  return rows;
}

std::vector<float> read_floats(const fs::path& path) {
  REQUIRE(fs::is_regular_file(path));
  const std::string bytes = meridian::tests::file_contents(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST_CASE("an export of a messy table carries its names and preprocessing: raw CSV rows predict in PyTorch",
          "[process][export]") {
  if (!python_has_torch_and_onnx()) {
    WARN("SKIPPED: " << kPython << " lacks numpy, torch or onnx (scripts/install-deps test installs them)");
    return;
  }
  TempDir tmp;
  const fs::path train = tmp.path() / "train.csv", test = tmp.path() / "test.csv";
  write_table(train, {"mrn", "age", "sex", "ward", "glucose", "diagnosis"}, messy_rows(210, 0));
  // The test file holds its columns in another order: they are matched by name.
  const auto test_rows = messy_rows(14, 1000);
  write_table(test, {"diagnosis", "glucose", "ward", "sex", "age", "mrn"}, test_rows);
  const fs::path checkpoint = tmp.path() / "clinic.mrdn";
  const auto trained =
      run_meridian("train --train " + quoted(train) + " --test " + quoted(test) + " " + kTableOptions +
                   " --model mlp --hidden 8 --epochs 4 --batch 8 --threads 1 --seed 5 --save " + quoted(checkpoint));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);

  // The checkpoint records the names and the preprocessing.
  const auto cp = meridian::daemon::read_checkpoint_file(checkpoint);
  const std::vector<std::string> features = {"age",   "glucose",  "age missing",   "glucose missing", "sex=F",
                                             "sex=M", "ward=icu", "ward=medicine", "ward=surgery"};
  CHECK(cp.inputs.feature_names == features);
  CHECK(cp.inputs.class_names == std::vector<std::string>{"benign", "malignant"});
  REQUIRE(cp.inputs.table.has_value());
  CHECK(cp.inputs.table->ignored == std::vector<std::string>{"mrn"});
  CHECK(cp.inputs.table->label == "diagnosis");
  CHECK(cp.inputs.table->missing_indicators);
  REQUIRE(cp.inputs.table->categorical.size() == 2);
  CHECK(cp.inputs.table->categorical[1].categories == std::vector<std::string>{"icu", "medicine", "surgery"});

  // Meridian's logits on the test file, read and scaled as `meridian eval` reads it.
  meridian::models::data::DataOptions options;
  options.label_column = "diagnosis";
  options.tabular = meridian::models::data::parse_tabular_spec("mrn", "sex,ward=icu|medicine|surgery", true);
  options.standardization = {cp.input_mean, cp.input_stddev};
  const auto data = meridian::models::data::load_train_and_test(train.string(), test.string(), options);
  REQUIRE(data.test.rows == test_rows.size());
  auto model = meridian::daemon::model_from_checkpoint(cp, data.test, checkpoint.string());
  const float* out = model->forward(data.test.features.data(), data.test.rows);
  const std::vector<float> reference(out, out + data.test.rows * 2);
  std::vector<std::string> meridian_classes;
  for (std::size_t r = 0; r < data.test.rows; ++r) {
    meridian_classes.push_back(reference[2 * r + 1] > reference[2 * r] ? "malignant" : "benign");
  }

  const fs::path safetensors = tmp.path() / "clinic.safetensors", onnx = tmp.path() / "clinic.onnx";
  for (const auto& file : {safetensors, onnx}) {
    const auto exported = run_meridian("export " + quoted(checkpoint) + " --format " +
                                       (file == onnx ? "onnx" : "safetensors") + " --out " + quoted(file));
    INFO(exported.output);
    REQUIRE(exported.exit_code == 0);
    CHECK(exported.output.find("input and class names included, table preprocessing included") != std::string::npos);
  }

  // PyTorch from the raw rows as text, the ID column and gaps included, the label left out.
  nlohmann::json raw = nlohmann::json::array();
  for (const auto& r : test_rows) {
    raw.push_back({{"mrn", r.mrn}, {"age", r.age}, {"sex", r.sex}, {"ward", r.ward}, {"glucose", r.glucose}});
  }
  const fs::path rows_file = tmp.path() / "rows.json", torch_logits = tmp.path() / "logits-rows.f32";
  std::ofstream(rows_file) << raw.dump();
  const auto python =
      run_shell(kPython + " " + std::string(meridian::tests::source_dir()) + "/tests/cli/export_check.py rows " +
                quoted(safetensors) + " " + quoted(rows_file) + " - " + quoted(torch_logits));
  INFO(python.output);
  REQUIRE(python.exit_code == 0);
  const auto answer = nlohmann::json::parse(python.output.substr(python.output.rfind('{')));
  CHECK(answer["feature_names"].get<std::vector<std::string>>() == features);
  CHECK(answer["class_names"].get<std::vector<std::string>>() == std::vector<std::string>{"benign", "malignant"});
  const auto predicted = answer["predicted"].get<std::vector<std::string>>();
  CHECK(predicted == meridian_classes);
  CHECK(answer["first"].get<std::string>() == meridian_classes.front());
  const float torch_difference = max_difference(read_floats(torch_logits), reference);
  WARN("raw rows through PyTorch: largest logit difference " << torch_difference);
  CHECK(torch_difference <= 1e-4f);

  // The ONNX graph takes the inputs as Meridian reads them before scaling, a missing value as NaN.
  auto unscaled = options;
  unscaled.standardize = false;
  unscaled.standardization = {};
  const auto raw_data = meridian::models::data::load_train_and_test(train.string(), test.string(), unscaled);
  REQUIRE(meridian::models::data::count_missing(raw_data.test.features) > 0);
  const fs::path raw_inputs = tmp.path() / "raw.f32", onnx_logits = tmp.path() / "logits-onnx.f32";
  {
    std::ofstream f(raw_inputs, std::ios::binary);
    f.write(reinterpret_cast<const char*>(raw_data.test.features.data()),
            static_cast<std::streamsize>(raw_data.test.features.size() * sizeof(float)));
  }
  const auto graph = run_shell(kPython + " " + std::string(meridian::tests::source_dir()) +
                               "/tests/cli/export_check.py onnx " + quoted(onnx) + " " + quoted(raw_inputs) + " " +
                               std::to_string(test_rows.size()) + " " + quoted(onnx_logits));
  INFO(graph.output);
  REQUIRE(graph.exit_code == 0);
  const float onnx_difference = max_difference(read_floats(onnx_logits), reference);
  WARN("NaN-holding inputs through the ONNX graph: largest logit difference " << onnx_difference);
  CHECK(onnx_difference <= 1e-4f);

  // `meridian eval` agrees: the test rows labelled with PyTorch's predictions are all right.
  std::vector<Row> labelled = test_rows;
  for (std::size_t r = 0; r < labelled.size(); ++r) labelled[r].diagnosis = predicted[r];
  const fs::path predictions = tmp.path() / "predicted.csv";
  write_table(predictions, {"mrn", "age", "sex", "ward", "glucose", "diagnosis"}, labelled);
  const auto eval = run_meridian("eval --checkpoint " + quoted(checkpoint) + " --train " + quoted(train) + " --test " +
                                 quoted(predictions) + " --classes benign,malignant " + kTableOptions + " --json");
  INFO(eval.output);
  REQUIRE(eval.exit_code == 0);
  CHECK(eval.output.find("\"test_accuracy\": 1.000000") != std::string::npos);
}

TEST_CASE("checkpoints keep the input description through a write and read; older ones load without it", "[unit]") {
  TempDir tmp;
  const std::vector<float> parameters = {1.0f, 2.0f};
  meridian::daemon::CheckpointView view;
  view.parameters = parameters;
  view.model_fingerprint = "mlp";
  view.algorithm = "train";
  const fs::path bare = tmp.path() / "bare.mrdn";
  REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(bare, view));
  CHECK(meridian::daemon::read_checkpoint_file(bare).inputs.empty());

  view.inputs.feature_names = {"age", "age missing", "ward=icu", "ward=ward 7"};
  view.inputs.class_names = {"no", "yes"};
  meridian::models::data::TableSchema table;
  table.numeric = {"age"};
  table.categorical = {{"ward", {"icu", "ward 7"}}};
  table.missing_indicators = true;
  table.ignored = {"id", "mrn"};
  table.label = "outcome";
  view.inputs.table = table;
  const fs::path named = tmp.path() / "named.mrdn";
  REQUIRE_FALSE(meridian::daemon::write_checkpoint_file(named, view));
  const auto cp = meridian::daemon::read_checkpoint_file(named);
  CHECK(cp.inputs == view.inputs);
  CHECK(cp.parameters == parameters);
}

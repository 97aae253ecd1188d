// The fuzz targets' stored inputs (tests/fuzz/, docs/security.md): every seed of
// tests/fuzz/corpus/NAME/ and every kept input of tests/fuzz/regressions/NAME/ goes through what the
// libFuzzer target NAME does with an input (tests/fuzz/fuzz_inputs.h): the real checkpoint reader,
// model file parser, roster and configuration parsers and data loaders. Passing means each is refused
// or read without a crash or an unexpected exception (under `make sanitize`: without a sanitizer
// report either). The wire decoder's inputs are replayed by tests/peer/wire_fuzz_test.cc.
// The hidden cases write the seed corpora and the crafted hostile inputs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_config.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "models/model_file.h"
#include "tests/fuzz/fuzz_inputs.h"
#include "tests/models/data/gzip_bytes.h"
#include "tests/models/data/image_bytes.h"
#include "tests/models/data/npy_bytes.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::FuzzBytes;

namespace {

const fs::path kFuzz = fs::path(meridian::tests::source_dir()) / "tests" / "fuzz";

// Every target but the wire decoder, by the name of its folders and of its `make fuzz FUZZ_TARGET=`.
const std::map<std::string, std::function<void(FuzzBytes)>>& targets() {
  namespace t = meridian::tests;
  static const std::map<std::string, std::function<void(FuzzBytes)>> all{{"checkpoint", t::fuzz_checkpoint},
                                                                         {"model_file", t::fuzz_model_file},
                                                                         {"roster", t::fuzz_roster},
                                                                         {"site_config", t::fuzz_site_config},
                                                                         {"csv", t::fuzz_csv},
                                                                         {"npy", t::fuzz_npy},
                                                                         {"idx", t::fuzz_idx},
                                                                         {"image_file", t::fuzz_image_file}};
  return all;
}

std::string contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files of `dir` by name (none when it does not exist).
std::map<std::string, std::string> stored(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().filename().string()] = contents(e.path());
  }
  return out;
}

FuzzBytes bytes_of(const std::string& s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

// A two-file input as split_input() reads it.
std::string two_files(const std::string& first, const std::string& second) {
  return std::string{static_cast<char>(first.size() & 0xff), static_cast<char>((first.size() >> 8) & 0xff)} + first +
         second;
}

// A checkpoint fuzz input: the file without the trailer sealed_checkpoint() adds back.
std::string checkpoint_input(const meridian::daemon::CheckpointView& view) {
  meridian::tests::TempDir dir;
  const auto path = dir.path() / "seed.ckpt";
  if (const auto problem = meridian::daemon::write_checkpoint_file(path, view)) FAIL(*problem);
  const auto file = contents(path);
  return file.substr(0, file.size() - 8);
}

// A checkpoint of the model `model` (as the fuzz targets' test set shapes it), `parameters` its values.
std::string model_checkpoint(const meridian::models::Model& model, const std::string& model_file = "") {
  std::vector<float> parameters(model.parameters().begin(), model.parameters().end());
  std::vector<float> state(model.state_count(), 1.0f);
  meridian::daemon::CheckpointView view;
  view.parameters = parameters;
  view.model_state = state;
  view.model_fingerprint = model.fingerprint();
  view.algorithm = "sgp";
  view.push_sum_weight = 0.5;
  view.step = 3;
  view.model_file = model_file;
  return checkpoint_input(view);
}

constexpr const char* kKeyA = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
constexpr const char* kKeyB = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
constexpr const char* kSmallModel =
    "model tiny\nconv2d 2 kernel=3 padding=1\nbatch_norm\nrelu\nresidual\n  conv2d 2 kernel=3 padding=1\n"
    "  group_norm 2\nend\nmax_pool 2\nglobal_avg_pool\nflatten\ndropout 0.1\nlinear 4\ngelu\nlinear classes\n";

std::map<std::string, std::map<std::string, std::string>> seeds() {
  namespace md = meridian::models::data;
  using meridian::tests::npy_bytes;
  using meridian::tests::raw_bytes;
  std::map<std::string, std::map<std::string, std::string>> out;
  const auto test = meridian::tests::fuzz_image_dataset();
  const meridian::models::Shape input{test.channels, test.height, test.width};
  auto backend = std::make_shared<meridian::models::CpuBackend>(1);

  auto& checkpoint = out["checkpoint"];
  checkpoint["logreg.bin"] = model_checkpoint(*meridian::models::make_model("logreg", input, 3, {}, backend, 1));
  checkpoint["mlp.bin"] = model_checkpoint(*meridian::models::make_model("mlp", input, 3, {2}, backend, 1));
  checkpoint["mlp-bn.bin"] = model_checkpoint(*meridian::models::make_model("mlp-bn", input, 3, {2, 2}, backend, 1));
  checkpoint["model-file.bin"] =
      model_checkpoint(*meridian::models::parse_model_file(kSmallModel, "tiny", input, 3, backend, 1), kSmallModel);

  auto& model_file = out["model_file"];
  for (const auto& e : fs::directory_iterator(fs::path(meridian::tests::source_dir()) / "examples" / "models"))
    model_file[e.path().filename().string()] = contents(e.path());
  model_file["tiny.model"] = kSmallModel;
  model_file["shortcut.model"] =
      "residual\n  conv2d 4 kernel=3 stride=2 padding=1\n  tanh\nshortcut\n  conv2d 4 kernel=1 stride=2\nend\n"
      "avg_pool 2 stride=1\nsigmoid\nbasic_block 4 stride=2\nflatten\nlinear classes\n";

  auto& roster = out["roster"];
  roster["two.txt"] = std::string("# the federation\nalpha ") + kKeyA + " tcp://10.0.0.1:7400\nbeta " + kKeyB + "\n";
  roster["one.txt"] = std::string("\n  gamma   ") + kKeyB + "   tcp://host.example:7401  # comment\n";

  auto& site_config = out["site_config"];
  site_config["defaults.toml"] = meridian::daemon::render_site_config(meridian::daemon::SiteConfig{});
  site_config["ohio.toml"] = contents(fs::path(meridian::tests::source_dir()) / "docker" / "sites" / "ohio.toml");
  site_config["short.toml"] =
      "name = \"a\"\nalgo = \"dts\"\ndelay = \"auto\"\nwan = \"latency=20ms,jitter=5ms\"\n"
      "join = [\"tcp://127.0.0.1:7401\"]\nlr = 0.05\n[extra]\nx = 1\n";

  auto& csv = out["csv"];
  const std::string table =
      "\xEF\xBB\xBF"
      "age,weight,\"note, quoted\",label\n34,70.5,1,yes\n51,82,\"2\",no\n\n"
      "29, 60 ,3,yes\n";
  csv["header.csv"] = table;
  csv["plain.csv"] = "1,0.5,2\n0,1.5,3\n1,2.5e3,-4\nyes,1,1\n";
  csv["header.csv.gz"] = meridian::tests::gzip_bytes(table);

  auto& npy = out["npy"];
  const auto features = npy_bytes("<f4", "(4, 3)", raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}));
  const auto labels = npy_bytes("<i8", "(4,)", raw_bytes(std::vector<std::int64_t>{0, 1, 2, 1}));
  npy["table.bin"] = two_files(features, labels);
  npy["images.bin"] = two_files(npy_bytes("|u1", "(2, 2, 2)", std::string(8, '\x80')),
                                npy_bytes("<U3", "(2, 1)", raw_bytes(std::vector<char32_t>{'a', 0, 0, 'b', 'c', 0})));
  npy["nchw.bin"] = two_files(npy_bytes("<f8", "(1, 1, 2, 2)", raw_bytes(std::vector<double>{1, 2, 3, 4})),
                              npy_bytes("|u1", "(1,)", std::string(1, '\x02')));
  {
    meridian::tests::TempDir dir;
    meridian::tests::write_zip((dir.path() / "d.npz").string(), {{"x.npy", features}, {"y.npy", labels}}, true);
    npy["deflated.npz"] = contents(dir.path() / "d.npz");
    meridian::tests::write_zip((dir.path() / "s.npz").string(), {{"x.npy", features}, {"y.npy", labels}}, false);
    npy["stored.npz"] = contents(dir.path() / "s.npz");
  }

  auto& idx = out["idx"];
  const std::string images = std::string("\0\0\x08\x03\0\0\0\x03\0\0\0\x02\0\0\0\x02", 16) + std::string(12, '\x40');
  const std::string idx_labels = std::string("\0\0\x08\x01\0\0\0\x03", 8) + std::string("\x01\x00\x09", 3);
  idx["raw.bin"] = two_files(images, idx_labels);
  idx["gzip.bin"] = two_files(meridian::tests::gzip_bytes(images), meridian::tests::gzip_bytes(idx_labels));

  auto& image_file = out["image_file"];
  {
    meridian::tests::TempDir dir;
    const auto p = [&](const char* name) { return (dir.path() / name).string(); };
    meridian::tests::write_png(p("g.png"), 4, 3, 1, std::vector<unsigned char>(12, 100));
    meridian::tests::write_png(p("rgba.png"), 2, 2, 4, std::vector<unsigned char>(16, 200));
    meridian::tests::write_jpeg(p("g.jpg"), 8, 8, 1, std::vector<unsigned char>(64, 50));
    meridian::tests::write_jpeg(p("rgb.jpg"), 8, 8, 3, std::vector<unsigned char>(192, 150));
    for (const char* name : {"g.png", "rgba.png", "g.jpg", "rgb.jpg"}) image_file[name] = contents(p(name));
  }
  return out;
}

// Crafted inputs that lie about sizes, kept with the fuzzers' finds: each must be refused.
std::map<std::string, std::map<std::string, std::string>> hostile_inputs() {
  std::map<std::string, std::map<std::string, std::string>> out;
  // An MLP 2^61 wide whose unchecked sizes wrap around to 2 parameters.
  const std::string w1 = "2305843009213693952", w2 = "11529215046068469760";
  const std::vector<float> two{1.0f, 2.0f};
  meridian::daemon::CheckpointView view;
  view.parameters = two;
  view.model_fingerprint = "mlp|in=1x12x12|flatten|linear(144->" + w1 + ")|relu|linear(" + w1 + "->" + w2 +
                           ")|relu|linear(" + w2 + "->3)|classes=3|params=2";
  view.algorithm = "sgp";
  out["checkpoint"]["mlp-2-61-wide.bin"] = checkpoint_input(view);
  view.model_fingerprint =
      "mlp|in=1x12x12|flatten|linear(144->99999999999999999999999)|relu|linear(3->3)|classes=3|params=2";
  out["checkpoint"]["width-past-64-bits.bin"] = checkpoint_input(view);
  view.model_fingerprint = "logreg|in=1x12x12|flatten|linear(144->3)|classes=3|params=435";
  out["checkpoint"]["params-not-stored.bin"] = checkpoint_input(view);

  out["model_file"]["linear-2-61.model"] = "flatten\nlinear " + w1 + "\nlinear classes\n";
  out["model_file"]["conv-padding-2-62.model"] =
      "conv2d 1 kernel=3 padding=4611686018427387904\nglobal_avg_pool\nlinear classes\n";
  out["model_file"]["conv-wide-output.model"] = "conv2d 65536 kernel=1 padding=100\nglobal_avg_pool\nlinear classes\n";
  std::string nested;
  for (int i = 0; i < 2000; ++i) nested += "residual\n";
  out["model_file"]["residual-2000-deep.model"] = nested + "relu\n";

  const std::string labels3 = std::string("\0\0\x08\x01\0\0\0\x03", 8) + std::string("\x01\x00\x02", 3);
  const std::string no_labels = std::string("\0\0\x08\x01\0\0\0\0", 8);
  out["idx"]["count-0-wide-images.bin"] =
      two_files(std::string("\0\0\x08\x03\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff", 16), no_labels);
  out["idx"]["image-2-32-pixels.bin"] =
      two_files(std::string("\0\0\x08\x03\0\0\0\x03\0\x01\0\0\0\x01\0\0", 16), labels3);

  using meridian::tests::npy_bytes;
  const auto features = npy_bytes("<f4", "(2, 1)", std::string(8, '\0'));
  out["npy"]["label-2-31.bin"] = two_files(
      features, npy_bytes("<i4", "(2,)", meridian::tests::raw_bytes(std::vector<std::int32_t>{0, 2147483647})));
  out["npy"]["shape-product-overflows.bin"] =
      two_files(npy_bytes("<f4", "(4294967296, 4294967296, 16)", ""), npy_bytes("<i8", "(1,)", std::string(8, '\0')));

  // A PNG whose header declares 65535 x 65535 pixels (4 GiB as gray), with an empty image data chunk.
  const auto chunk = [](const std::string& type, const std::string& data) {
    std::string out;
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((data.size() >> (8 * i)) & 0xff));
    const std::string body = type + data;
    const auto crc =
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
    out += body;
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    return out;
  };
  out["image_file"]["png-4-gib.png"] = std::string("\x89PNG\r\n\x1a\n", 8) +
                                       chunk("IHDR", std::string("\0\0\xff\xff\0\0\xff\xff\x08\0\0\0\0", 13)) +
                                       chunk("IDAT", "") + chunk("IEND", "");
  return out;
}

void write_all(const fs::path& root, const std::map<std::string, std::map<std::string, std::string>>& inputs) {
  for (const auto& [target, files] : inputs) {
    fs::create_directories(root / target);
    for (const auto& [name, bytes] : files) std::ofstream(root / target / name, std::ios::binary) << bytes;
  }
}

}  // namespace

TEST_CASE("every stored fuzz input is read or refused without a crash", "[fuzz][unit]") {
  std::size_t replayed = 0;
  for (const auto& [target, run] : targets()) {
    const auto corpus = stored(kFuzz / "corpus" / target);
    INFO(target);
    CHECK_FALSE(corpus.empty());
    for (const auto& folder : {"corpus", "regressions"}) {
      for (const auto& [name, input] : stored(kFuzz / folder / target)) {
        INFO(folder << "/" << target << "/" << name);
        CHECK_NOTHROW(run(bytes_of(input)));
        ++replayed;
      }
    }
  }
  CHECK(replayed >= 40);
}

TEST_CASE("the stored seed corpora and crafted inputs are current", "[fuzz][unit]") {
  for (const auto& [folder, inputs] : {std::pair{"corpus", seeds()}, std::pair{"regressions", hostile_inputs()}}) {
    for (const auto& [target, files] : inputs) {
      const auto kept = stored(kFuzz / folder / target);
      for (const auto& [name, bytes] : files) {
        INFO(folder << "/" << target << "/" << name << " (rewrite: build/meridian_tests \"[.corpus]\")");
        REQUIRE(kept.count(name) == 1);
        // Checkpoints and archives carry times and random draws; the rest must be byte for byte.
        if (target != "checkpoint" && !name.ends_with(".npz") && !name.ends_with(".gz") && !name.ends_with(".jpg"))
          CHECK(kept.at(name) == bytes);
      }
    }
  }
}

TEST_CASE("the crafted hostile inputs are refused, each for its size", "[fuzz][unit]") {
  // Each goes through the real loader directly, so that the refusal itself is seen.
  meridian::tests::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir.path() / name, std::ios::binary) << bytes;
    return (dir.path() / name).string();
  };
  const auto hostile = hostile_inputs();
  const auto test = meridian::tests::fuzz_image_dataset();
  const auto sealed = [](const std::string& input) { return meridian::tests::sealed_checkpoint(bytes_of(input)); };
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(meridian::daemon::evaluate_checkpoints(
                        {write("wide.ckpt", sealed(hostile.at("checkpoint").at("mlp-2-61-wide.bin")))}, test),
                    Contains("wide.ckpt") && Contains("2305843009213693952") && Contains("268435456"));
  CHECK_THROWS_WITH(meridian::daemon::evaluate_checkpoints(
                        {write("past.ckpt", sealed(hostile.at("checkpoint").at("width-past-64-bits.bin")))}, test),
                    Contains("past.ckpt") && Contains("not a whole number"));
  CHECK_THROWS_WITH(meridian::daemon::evaluate_checkpoints(
                        {write("p.ckpt", sealed(hostile.at("checkpoint").at("params-not-stored.bin")))}, test),
                    Contains("p.ckpt") && Contains("declares 435 parameters"));
  auto backend = std::make_shared<meridian::models::CpuBackend>(1);
  const auto parse = [&](const std::string& name) {
    meridian::models::parse_model_file(hostile.at("model_file").at(name), name, {1, 12, 12}, 3, backend, 1);
  };
  CHECK_THROWS_WITH(parse("linear-2-61.model"), Contains("linear-2-61.model:2:") && Contains("268435456"));
  CHECK_THROWS_WITH(parse("conv-padding-2-62.model"), Contains(":1:") && Contains("padding"));
  CHECK_THROWS_WITH(parse("conv-wide-output.model"), Contains(":1:") && Contains("67108864"));
  CHECK_THROWS_WITH(parse("residual-2000-deep.model"), Contains(":33:") && Contains("nested more than 32 deep"));
  namespace md = meridian::models::data;
  const auto idx = [&](const std::string& name) {
    const auto [images, labels] = meridian::tests::split_input(bytes_of(hostile.at("idx").at(name)));
    md::read_idx(write("images", std::string(images.begin(), images.end())),
                 write("labels", std::string(labels.begin(), labels.end())));
  };
  CHECK_THROWS_WITH(idx("count-0-wide-images.bin"), Contains("images") && Contains("no images"));
  CHECK_THROWS_WITH(idx("image-2-32-pixels.bin"), Contains("images") && Contains("truncated"));
  // A gzip file can hold what it announces in a few bytes per row: one 8193×8193 image of zeros.
  const std::string big_image =
      std::string("\0\0\x08\x03\0\0\0\x01\0\0\x20\x01\0\0\x20\x01", 16) + std::string(std::size_t{8193} * 8193, '\0');
  CHECK_THROWS_WITH(md::read_idx(write("big-images.gz", meridian::tests::gzip_bytes(big_image)),
                                 write("one-label", std::string("\0\0\x08\x01\0\0\0\x01\0", 9))),
                    Contains("big-images.gz: pixels per image: 8193 x 8193 is more than 67108864"));
  const auto npy = [&](const std::string& name) {
    const auto [x, y] = meridian::tests::split_input(bytes_of(hostile.at("npy").at(name)));
    md::dataset_from_arrays(md::parse_npy(std::string(x.begin(), x.end()), "x.npy"), "x.npy",
                            md::parse_npy(std::string(y.begin(), y.end()), "y.npy"), "y.npy");
  };
  CHECK_THROWS_WITH(npy("label-2-31.bin"), Contains("y.npy") && Contains("2147483647") && Contains("65535"));
  CHECK_THROWS_WITH(npy("shape-product-overflows.bin"), Contains("x.npy") && Contains("too large"));
  CHECK_THROWS_WITH(md::decode_image(write("big.png", hostile.at("image_file").at("png-4-gib.png")), 3),
                    Contains("big.png") && Contains("65535x65535") && Contains("67108864"));
}

// Rewrites the named seeds of tests/fuzz/corpus/ (not the wire decoder's) and the crafted hostile inputs
// of tests/fuzz/regressions/; the inputs libFuzzer runs added next to them (named by their SHA-1, merged
// with `-merge=1`) stay: build/meridian_tests "[.corpus]"
TEST_CASE("write the fuzz seed corpora", "[.corpus]") {
  write_all(kFuzz / "corpus", seeds());
  write_all(kFuzz / "regressions", hostile_inputs());
}

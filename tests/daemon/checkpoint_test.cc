#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>

#include <fstream>
#include <iterator>
#include <numeric>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_store.h"
#include "error/error.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::Checkpoint;
using meridian::daemon::CheckpointError;
using meridian::daemon::CheckpointLoadResult;
using meridian::daemon::CheckpointStore;
using meridian::daemon::fresh_start_message;
using meridian::daemon::read_checkpoint_file;
using meridian::daemon::write_checkpoint_file;
using meridian::tests::TempDir;
using meridian::tests::file_contents;

namespace {

Checkpoint sample(std::uint64_t step, std::size_t params = 1000) {
  Checkpoint cp;
  cp.parameters.resize(params);
  for (std::size_t i = 0; i < params; ++i) cp.parameters[i] = 0.001f * static_cast<float>(i) - 0.3f + step;
  cp.optimizer_state.push_back({"momentum", std::vector<float>(params, -1.5f)});
  cp.optimizer_state.push_back({"adam.v", std::vector<float>(params / 2, 2.5e-7f)});
  cp.optimizer_state.push_back({"empty", {}});
  cp.push_sum_weight = 0.3125 + static_cast<double>(step);
  cp.push_sum_weight_average = 0.71875 + static_cast<double>(step);
  cp.step = step;
  cp.epoch = step / 100;
  cp.data_position = step * 32 % 60000;
  cp.rng_state = {1, 2, 3, 0, 255, 128};
  cp.model_fingerprint = "mlp:784-256-128-10";
  cp.algorithm = "sgp";
  return cp;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const fs::path& p, std::optional<std::string> fingerprint = std::nullopt) {
  try {
    read_checkpoint_file(p, fingerprint);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Runs `body` with the process's file size limit at `bytes`, so writes past it fail with EFBIG the way
// they fail with ENOSPC on a full disk: a real failed write() in the middle of the file.
template <typename F>
void with_file_size_limit(rlim_t bytes, F body) {
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);  // otherwise the kernel kills us instead of failing write()
  rlimit limited = old;
  limited.rlim_cur = bytes;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &limited) == 0);
  body();
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
}

}  // namespace

TEST_CASE("a checkpoint round-trips every section exactly", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  for (std::size_t params : {std::size_t{0}, std::size_t{1}, std::size_t{12345}}) {
    const auto cp = sample(7, params);
    const auto file = tmp.path() / "one.mrdn";
    REQUIRE_FALSE(write_checkpoint_file(file, cp.view()));
    const auto back = read_checkpoint_file(file, std::string("mlp:784-256-128-10"));
    CHECK(back == cp);
    REQUIRE(back.find_optimizer_state("adam.v") != nullptr);
    CHECK(back.find_optimizer_state("adam.v")->size() == params / 2);
    CHECK(back.find_optimizer_state("nope") == nullptr);
  }
  // Nothing but the checkpoint is left in the directory (the temporary file was renamed).
  CHECK(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("a single-bit flip in any byte of a checkpoint is detected", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  const auto file = tmp.path() / "cp.mrdn";
  REQUIRE_FALSE(write_checkpoint_file(file, sample(3, 8).view()));
  const auto good = file_contents(file);
  // Every byte, with the flipped bit cycling through the positions (all eight would take 8x the file
  // writes for no new kind of damage: CRC-32 catches every single-bit error by construction).
  for (std::size_t byte = 0; byte < good.size(); ++byte) {
    const int bit = static_cast<int>(byte % 8);
    auto bad = good;
    bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
    write_bytes(file, bad);
    INFO("byte " << byte << " bit " << bit);
    const auto error = error_of(file);
    CHECK_FALSE(error.empty());
    CHECK(error.find(file.string()) != std::string::npos);
  }
}

TEST_CASE("corrupt checkpoints are rejected with a message naming the file and the problem",
          "[daemon][checkpoint][unit]") {
  TempDir tmp;
  const auto file = tmp.path() / "cp.mrdn";
  REQUIRE_FALSE(write_checkpoint_file(file, sample(3, 100).view()));
  const auto good = file_contents(file);
  using Catch::Matchers::Contains;

  SECTION("truncated at any length") {
    for (std::size_t len : {std::size_t{0}, std::size_t{5}, std::size_t{24}, good.size() / 2, good.size() - 1}) {
      write_bytes(file, good.substr(0, len));
      INFO("length " << len);
      CHECK_THAT(error_of(file), Contains(file.string()) && Contains("truncated"));
    }
  }
  SECTION("bytes appended") {
    auto longer = good;
    longer.push_back('x');
    write_bytes(file, longer);
    CHECK_THAT(error_of(file), Contains("length mismatch"));
  }
  SECTION("wrong magic") {
    auto bad = good;
    bad[0] = 'X';
    write_bytes(file, bad);
    CHECK_THAT(error_of(file), Contains("not a Meridian checkpoint"));
  }
  SECTION("wrong version") {
    auto bad = good;
    bad[8] = 2;
    write_bytes(file, bad);
    CHECK_THAT(error_of(file), Contains("version 2 is not supported"));
  }
  SECTION("payload corrupted") {
    auto bad = good;
    bad[good.size() / 2] ^= 0x10;
    write_bytes(file, bad);
    CHECK_THAT(error_of(file), Contains("checksum mismatch"));
  }
  SECTION("fingerprint of another model") {
    CHECK_THAT(error_of(file, std::string("cnn:lenet5")),
               Contains("model fingerprint 'mlp:784-256-128-10' does not match this model's 'cnn:lenet5'"));
    CHECK(error_of(file).empty());
  }
  SECTION("missing file") {
    CHECK_THAT(error_of(tmp.path() / "absent.mrdn"), Contains("absent.mrdn") && Contains("cannot open"));
  }
}

TEST_CASE("the store keeps the newest K checkpoints and loads the newest", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  CheckpointStore store(tmp.path() / "ckpt", 3);
  CHECK_FALSE(store.load_newest().checkpoint);  // the directory does not exist yet
  for (std::uint64_t step : {10, 20, 30, 40, 50}) {
    const auto status = store.write(sample(step).view());
    REQUIRE(status.ok);
    CHECK(status.warnings.empty());
  }
  const auto files = store.list();
  REQUIRE(files.size() == 3);
  CHECK(files[0] == store.path_for_step(50));
  CHECK(files[2] == store.path_for_step(30));
  const auto loaded = store.load_newest("mlp:784-256-128-10");
  REQUIRE(loaded.checkpoint);
  CHECK(*loaded.checkpoint == sample(50));
  CHECK(loaded.skipped.empty());

  // Writing the same step again replaces it rather than adding a file.
  REQUIRE(store.write(sample(50).view()).ok);
  CHECK(store.list().size() == 3);
}

TEST_CASE("a corrupt or truncated newest checkpoint is reported and the previous one used",
          "[daemon][checkpoint][unit]") {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 5);
  for (std::uint64_t step : {1, 2, 3}) REQUIRE(store.write(sample(step).view()).ok);
  const auto newest = store.path_for_step(3);
  const auto middle = store.path_for_step(2);
  auto bytes = file_contents(newest);
  bytes.resize(bytes.size() - 100);
  write_bytes(newest, bytes);
  auto flipped = file_contents(middle);
  flipped[200] ^= 1;
  write_bytes(middle, flipped);

  const auto loaded = store.load_newest();
  REQUIRE(loaded.checkpoint);
  CHECK(loaded.checkpoint->step == 1);
  CHECK(loaded.file == store.path_for_step(1));
  REQUIRE(loaded.skipped.size() == 2);
  CHECK_THAT(loaded.skipped[0].line(),
             Catch::Matchers::Contains(newest.string()) && Catch::Matchers::Contains("truncated"));
  CHECK(loaded.skipped[0].file == newest);
  CHECK_THAT(loaded.skipped[1].line(),
             Catch::Matchers::Contains(middle.string()) && Catch::Matchers::Contains("checksum mismatch"));
  CHECK(loaded.skipped[1].reason.starts_with("checksum mismatch"));

  // When the model changed, every checkpoint of the old model is passed over with the reason.
  const auto other = store.load_newest(std::string("logreg:784-10"));
  CHECK_FALSE(other.checkpoint);
  REQUIRE(other.skipped.size() == 3);
  CHECK_THAT(other.skipped[2].line(), Catch::Matchers::Contains("does not match this model"));
}

TEST_CASE("an unwritable checkpoint directory gives a clear error and does not throw", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  // A directory under a regular file cannot be created, even by root.
  std::ofstream(tmp.path() / "plain-file") << "not a directory";
  CheckpointStore store(tmp.path() / "plain-file" / "ckpt", 2);
  const auto status = store.write(sample(1).view());
  CHECK_FALSE(status.ok);
  CHECK_THAT(status.error,
             Catch::Matchers::Contains("plain-file/ckpt") && Catch::Matchers::Contains("Not a directory"));
  CHECK_FALSE(store.load_newest().checkpoint);
}

TEST_CASE("a write that fails midway (disk full) leaves no partial file and keeps the previous ones",
          "[daemon][checkpoint][unit]") {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 2);
  REQUIRE(store.write(sample(1, 100).view()).ok);
  REQUIRE(store.write(sample(2, 100).view()).ok);
  const auto before = store.list();

  meridian::daemon::CheckpointWriteStatus status;
  // The small checkpoints fit under the limit; the big one fails part-way through its parameters.
  with_file_size_limit(64 * 1024, [&] { status = store.write(sample(3, 100000).view()); });
  CHECK_FALSE(status.ok);
  CHECK_THAT(status.error,
             Catch::Matchers::Contains(store.path_for_step(3).string()) && Catch::Matchers::Contains("write"));
  CHECK(store.list() == before);
  // No temporary file is left behind either: only the two good checkpoints remain.
  CHECK(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()) == 2);
  const auto loaded = store.load_newest();
  REQUIRE(loaded.checkpoint);
  CHECK(*loaded.checkpoint == sample(2, 100));
  CHECK(loaded.skipped.empty());
}

TEST_CASE("temporary files left by a killed writer are removed by the next write", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 2);
  const auto stale = tmp.path() / ".checkpoint-00000000000000000009.mrdn.tmp-999999999-0";
  std::ofstream(stale) << "half a checkpoint";
  REQUIRE(store.write(sample(10).view()).ok);
  CHECK_FALSE(fs::exists(stale));
  CHECK(store.list().size() == 1);
}

TEST_CASE("periodic checkpoints are due once per interval, failed attempts included", "[daemon][checkpoint][unit]") {
  TempDir tmp;
  using namespace std::chrono_literals;
  const auto made = CheckpointStore::Clock::now();
  CheckpointStore store(tmp.path(), 2, 60s);
  CHECK_FALSE(store.due(made));
  CHECK(store.due(made + 61s));
  CHECK_FALSE(store.last_success());

  REQUIRE(store.write(sample(1).view()).ok);
  REQUIRE(store.last_success());
  const auto written = *store.last_success();
  CHECK_FALSE(store.due(written + 59s));
  CHECK(store.due(written + 60s));

  std::ofstream(tmp.path() / "file") << "x";
  CheckpointStore broken(tmp.path() / "file" / "dir", 2, 60s);
  CHECK_FALSE(broken.write(sample(1).view()).ok);
  CHECK_FALSE(broken.last_success());
  CHECK_FALSE(broken.due(CheckpointStore::Clock::now() + 30s));

  CheckpointStore every_time(tmp.path(), 2);
  CHECK(every_time.due());
  CHECK_THROWS_AS(CheckpointStore(tmp.path(), 0), meridian::error::UserError);
}

TEST_CASE("passed-over checkpoints are set aside out of rotation, and a fresh start names the newest",
          "[daemon][checkpoint][unit]") {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 2);
  for (std::uint64_t step : {1, 2}) REQUIRE(store.write(sample(step).view()).ok);
  for (std::uint64_t step : {1, 2}) {
    auto bytes = file_contents(store.path_for_step(step));
    bytes[200] ^= 1;
    write_bytes(store.path_for_step(step), bytes);
  }
  const auto loaded = store.load_newest();
  REQUIRE_FALSE(loaded.checkpoint);
  REQUIRE(loaded.skipped.size() == 2);
  const auto message = fresh_start_message(tmp.path(), loaded);
  REQUIRE(message);
  CHECK(message->starts_with("no valid checkpoint in " + tmp.path().string() +
                             " (newest: " + store.path_for_step(2).filename().string() + ", checksum mismatch"));
  CHECK(message->ends_with("); starting fresh"));

  // A file of the same name set aside earlier is not overwritten.
  std::ofstream(store.path_for_step(2).string() + ".set-aside") << "an earlier one";
  const auto notes = store.set_aside(loaded);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].starts_with("kept " + store.path_for_step(2).string() + " as " + store.path_for_step(2).string() +
                             ".set-aside.1 (checksum mismatch"));
  CHECK(store.list().empty());
  // Rotation never reaches them: three more writes with keep = 2 leave the three set-aside files.
  for (std::uint64_t step : {3, 4, 5}) REQUIRE(store.write(sample(step).view()).ok);
  CHECK(store.list().size() == 2);
  std::size_t set_aside = 0;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    if (e.path().string().find(".set-aside") != std::string::npos) ++set_aside;
  CHECK(set_aside == 3);
  CHECK(fresh_start_message(tmp.path(), store.load_newest()) == std::nullopt);  // a valid one again
  CHECK(fresh_start_message(tmp.path() / "none", CheckpointLoadResult{}) == std::nullopt);
}

// A directory of checkpoints: periodic writes with rotation (the newest `keep` are kept) and loading the
// newest one that is valid. Files are named checkpoint-<step, 20 digits>.mrdn so that the name order is
// the step order. A directory belongs to one daemon at a time (hold a DirectoryLock on it, see
// directory_lock.h).
//
// Errors never throw through the training loop: write() returns a status the caller logs and counts,
// and load_newest() reports each file it had to pass over with the reason.
// Thread-safety: none; one thread (the trainer) owns the store.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"

namespace meridian::daemon {

struct CheckpointWriteStatus {
  bool ok = false;
  std::filesystem::path file;         // the checkpoint written (or that would have been written)
  std::string error;                  // when !ok: names the file or directory and the cause; previous files intact
  std::vector<std::string> warnings;  // e.g. an old checkpoint that could not be removed by rotation
};

// A checkpoint file that could not be used, and why ("checksum mismatch ...", "truncated ...", "does not
// match this model ...": the reader's words without the file name).
struct PassedOverCheckpoint {
  std::filesystem::path file;
  std::string reason;
  // "checkpoint FILE: REASON; trying an older checkpoint", the line the daemon logs.
  std::string line() const;
};

struct CheckpointLoadResult {
  std::optional<Checkpoint> checkpoint;  // nullopt when no valid checkpoint exists
  std::filesystem::path file;            // where `checkpoint` came from
  // Every newer file that was passed over, newest first.
  std::vector<PassedOverCheckpoint> skipped;
};

// When files were passed over and none was usable: "no valid checkpoint in DIR (newest: FILE, REASON);
// starting fresh". nullopt when a checkpoint was loaded or there was none at all.
std::optional<std::string> fresh_start_message(const std::filesystem::path& dir, const CheckpointLoadResult& loaded);

class CheckpointStore {
 public:
  using Clock = std::chrono::steady_clock;

  // Does not touch the file system; `dir` is created by the first write. keep >= 1. `interval` is
  // the period due() follows (zero: always due). Throws error::UserError for keep == 0 or a
  // negative interval.
  CheckpointStore(std::filesystem::path dir, std::size_t keep, Clock::duration interval = Clock::duration::zero());

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path_for_step(std::uint64_t step) const;

  // Writes `data` as the checkpoint of data.step (replacing one of the same step), then removes all
  // but the newest `keep` checkpoints and any temporary file a crashed writer left behind.
  // On failure (unwritable directory, disk full, ...) no partial file is left and older checkpoints
  // are untouched. Never throws except std::bad_alloc.
  [[nodiscard]] CheckpointWriteStatus write(const CheckpointView& data);

  // Whether a periodic checkpoint is due at `now`: `interval` has passed since the last write attempt
  // (or since the store was made). A failed attempt also restarts the period, so a full disk is
  // retried once per interval instead of at every step.
  bool due(Clock::time_point now = Clock::now()) const { return now - last_attempt_ >= interval_; }
  // When the last successful write finished; nullopt before the first.
  std::optional<Clock::time_point> last_success() const { return last_success_; }

  // The newest checkpoint that reads back valid (and, when given, matches `expected_fingerprint`);
  // newer invalid ones are listed in `skipped`. A missing directory means no checkpoint. Never throws
  // except std::bad_alloc.
  CheckpointLoadResult load_newest(const std::optional<std::string>& expected_fingerprint = std::nullopt) const;

  // The checkpoint files present, newest first (unreadable directory: empty).
  std::vector<std::filesystem::path> list() const;

  // Renames every passed-over file of `loaded` to FILE.set-aside (FILE.set-aside.N when that exists), out
  // of rotation: a later write would otherwise replace it (the same step) or rotate it away, and an
  // operator may want it back. Returns one line per file: where it went, or why it could not be moved.
  std::vector<std::string> set_aside(const CheckpointLoadResult& loaded) const;

 private:
  std::filesystem::path dir_;
  std::size_t keep_;
  Clock::duration interval_;
  Clock::time_point last_attempt_;
  std::optional<Clock::time_point> last_success_;
};

}  // namespace meridian::daemon

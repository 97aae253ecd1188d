#include "daemon/checkpoint/checkpoint_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "error/error.h"

namespace meridian::daemon {
namespace {

constexpr std::string_view kPrefix = "checkpoint-";
constexpr std::string_view kSuffix = ".mrdn";
constexpr std::size_t kStepDigits = 20;

bool is_checkpoint_name(const std::string& name) {
  if (name.size() != kPrefix.size() + kStepDigits + kSuffix.size()) return false;
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  return std::all_of(name.begin() + kPrefix.size(), name.begin() + kPrefix.size() + kStepDigits,
                     [](char c) { return c >= '0' && c <= '9'; });
}

// write_checkpoint_file names its temporary ".<final name>.tmp-<pid>-<random>" (daemon/files/safe_file.h); returns the pid part.
std::optional<long> temp_file_pid(const std::string& name) {
  constexpr std::string_view kTempPrefix = ".checkpoint-";
  constexpr std::string_view kTempMark = ".mrdn.tmp-";
  if (!name.starts_with(kTempPrefix)) return std::nullopt;
  const auto at = name.find(kTempMark);
  if (at == std::string::npos) return std::nullopt;
  try {
    return std::stol(name.substr(at + kTempMark.size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path dir, std::size_t keep, Clock::duration interval)
    : dir_(std::move(dir)), keep_(keep), interval_(interval), last_attempt_(Clock::now()) {
  if (keep_ == 0) throw error::UserError("CheckpointStore: keep must be at least 1");
  if (interval_ < Clock::duration::zero()) throw error::UserError("CheckpointStore: negative interval");
}

std::filesystem::path CheckpointStore::path_for_step(std::uint64_t step) const {
  char digits[kStepDigits + 1];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(step));
  return dir_ / (std::string(kPrefix) + digits + std::string(kSuffix));
}

CheckpointWriteStatus CheckpointStore::write(const CheckpointView& data) {
  CheckpointWriteStatus status;
  status.file = path_for_step(data.step);
  last_attempt_ = Clock::now();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    status.error = "cannot write checkpoint " + status.file.string() + ": cannot create directory " + dir_.string() +
                   ": " + ec.message();
    return status;
  }
  if (auto error = write_checkpoint_file(status.file, data)) {
    status.error = *error;
    return status;
  }
  status.ok = true;
  last_success_ = Clock::now();

  const auto files = list();
  for (std::size_t i = keep_; i < files.size(); ++i) {
    if (!std::filesystem::remove(files[i], ec) && ec) {
      status.warnings.push_back("cannot remove old checkpoint " + files[i].string() + ": " + ec.message());
    }
  }
  // A daemon killed while writing leaves its temporary file; ours (this pid) are never left behind.
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const auto pid = temp_file_pid(it->path().filename().string());
    if (pid && *pid != static_cast<long>(::getpid())) {
      std::error_code remove_ec;
      std::filesystem::remove(it->path(), remove_ec);
    }
  }
  return status;
}

std::vector<std::filesystem::path> CheckpointStore::list() const {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_checkpoint_name(it->path().filename().string())) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.filename() > b.filename(); });
  return files;
}

CheckpointLoadResult CheckpointStore::load_newest(const std::optional<std::string>& expected_fingerprint) const {
  CheckpointLoadResult result;
  for (const auto& file : list()) {
    try {
      result.checkpoint = read_checkpoint_file(file, expected_fingerprint);
      result.file = file;
      return result;
    } catch (const CheckpointError& e) {
      // The reader names the file ("checkpoint FILE: why"); the reason alone is kept.
      std::string reason = e.what();
      const std::string prefix = "checkpoint " + file.string() + ": ";
      if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
      result.skipped.push_back({file, std::move(reason)});
    }
  }
  return result;
}

std::vector<std::string> CheckpointStore::set_aside(const CheckpointLoadResult& loaded) const {
  std::vector<std::string> notes;
  for (const auto& passed : loaded.skipped) {
    std::filesystem::path target = passed.file.string() + ".set-aside";
    std::error_code ec;
    for (int n = 1; std::filesystem::exists(target, ec) && n < 1000; ++n)
      target = passed.file.string() + ".set-aside." + std::to_string(n);
    std::filesystem::rename(passed.file, target, ec);
    notes.push_back(ec ? "cannot set " + passed.file.string() + " aside: " + ec.message()
                       : "kept " + passed.file.string() + " as " + target.string() + " (" + passed.reason + ")");
  }
  return notes;
}

std::string PassedOverCheckpoint::line() const {
  return "checkpoint " + file.string() + ": " + reason + "; trying an older checkpoint";
}

std::optional<std::string> fresh_start_message(const std::filesystem::path& dir, const CheckpointLoadResult& loaded) {
  if (loaded.checkpoint || loaded.skipped.empty()) return std::nullopt;
  const PassedOverCheckpoint& newest = loaded.skipped.front();
  return "no valid checkpoint in " + dir.string() + " (newest: " + newest.file.filename().string() + ", " +
         newest.reason + "); starting fresh";
}

}  // namespace meridian::daemon

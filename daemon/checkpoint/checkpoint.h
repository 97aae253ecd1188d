// One checkpoint file: everything a restarted daemon needs to resume where it stopped (docs/design.md).
//
// File format (all integers little-endian), version 1:
//   header   "MRDNCKPT" (8 bytes), u32 version, u32 section count, u64 file length in bytes
//   sections u32 kind, u32 name length, u64 payload length, name bytes, payload bytes
//   trailer  u32 CRC-32 (zlib) of every byte before it, "ENDC" (4 bytes)
// Sections are found by kind (and by name for optimizer state), so a reader skips kinds it does not
// know; a change that older readers cannot skip bumps the version. Optional sections added later (older
// files lack them and read as empty): the model's state buffer (batch norm's running statistics), the
// input standardization the model was trained with, the text of the model file that describes it, and
// the input description (what the inputs and classes are called and how a raw table row becomes the
// inputs; a payload with its own format version, read as empty when the version is newer). Float payloads
// are IEEE-754 binary32 in little-endian order, which is the host order on every platform Meridian builds for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/data/tabular_schema.h"

namespace meridian::daemon {

inline constexpr std::uint32_t kCheckpointVersion = 1;

// What a model's inputs and outputs are called, and how a raw table row becomes its inputs: what an
// exported model needs to take a CSV row and answer with a class name (docs/export.md).
struct InputDescription {
  std::vector<std::string> feature_names;          // one per input, in input order; empty when unnamed
  std::vector<std::string> class_names;            // indexed by label; empty when unnamed
  std::optional<models::data::TableSchema> table;  // the table preprocessing the federation agreed on
  bool empty() const { return feature_names.empty() && class_names.empty() && !table; }
  bool operator==(const InputDescription&) const = default;
};

// A named piece of optimizer state (momentum buffer, Adam moments, ...): borrowed, not owned.
struct OptimizerSpan {
  std::string name;
  std::span<const float> values;
};

// What a writer hands over: borrows the trainer's buffers, so writing does not copy the model.
// The spans must stay valid and unchanged for the duration of the write.
struct CheckpointView {
  std::span<const float> parameters;           // the contiguous parameter buffer (sgp: the numerator x)
  std::vector<OptimizerSpan> optimizer_state;  // any number, names unique
  double push_sum_weight = 1.0;                // sgp's w; 1 for the other algorithms
  double push_sum_weight_average = 1.0;        // sgp's ŵ (gossip/push_sum_step_scale.h); 1 for the others
  std::uint64_t step = 0;                      // steps completed
  std::uint64_t epoch = 0;                     // epochs completed
  std::uint64_t data_position = 0;             // next sample index within the epoch's order
  std::span<const std::uint8_t> rng_state;     // serialized generator state, opaque here
  std::string model_fingerprint;               // architecture + sizes; checked when loading
  std::string algorithm;                       // its --algo name (daemon/algorithms/registry.h)
  // The run's training rounds [start_round, end_round): steps are rounds of the federation, so a
  // restarted site knows where the run ends. Optional section (0, 0 when absent).
  std::uint64_t start_round = 0;
  std::uint64_t end_round = 0;
  // Optional sections, each written only when not empty:
  std::span<const float> model_state;   // models::Model::state(): batch norm's running statistics
  std::span<const float> input_mean;    // the per-feature standardization x' = (x - mean) / stddev the
  std::span<const float> input_stddev;  // model's inputs were given (CSV data); same size as input_mean
  std::string model_file;               // the model file's text, for a model not built into Meridian
  InputDescription inputs;              // small, so copied; written when not empty
  // DP-SGD's spent budget, opaque here: its own record with its own check (daemon/privacy_budget.h).
  std::span<const std::uint8_t> privacy_budget;
};

// What a reader returns: owns its data.
struct Checkpoint {
  struct NamedState {
    std::string name;
    std::vector<float> values;
    bool operator==(const NamedState&) const = default;
  };
  std::vector<float> parameters;
  std::vector<NamedState> optimizer_state;
  double push_sum_weight = 1.0;
  double push_sum_weight_average = 1.0;  // 1, ŵ's start, in a file written before the section existed
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t data_position = 0;
  std::vector<std::uint8_t> rng_state;
  std::string model_fingerprint;
  std::string algorithm;
  std::uint64_t start_round = 0;
  std::uint64_t end_round = 0;
  std::vector<float> model_state;  // empty in a file without the section
  std::vector<float> input_mean, input_stddev;
  std::string model_file;
  InputDescription inputs;  // empty in a file without the section
  std::vector<std::uint8_t> privacy_budget;  // empty in a file without the section (a run without DP)

  // The optimizer state named `name`, or nullptr.
  const std::vector<float>* find_optimizer_state(const std::string& name) const;
  // A view borrowing this checkpoint's buffers (to write it again, e.g. in tests).
  CheckpointView view() const;
  bool operator==(const Checkpoint&) const = default;
};

// A file that is not a valid checkpoint; what() names the file and says what is wrong with it.
class CheckpointError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// Writes `data` to `path` atomically: a temporary file in the same directory is written, fsynced and
// renamed over `path`, then the directory is fsynced. On failure nothing is left at `path` that was
// not there before (an existing file stays intact) and the temporary file is removed.
// Returns an error message naming the path and the cause (e.g. "No space left on device"), or
// nullopt on success. Does not throw for I/O failures (only std::bad_alloc can escape).
[[nodiscard]] std::optional<std::string> write_checkpoint_file(const std::filesystem::path& path,
                                                               const CheckpointView& data);

// Reads and verifies the checkpoint at `path`: length, magic, version, checksum, section layout, and,
// when `expected_fingerprint` is given, the model fingerprint. Throws CheckpointError on any problem.
Checkpoint read_checkpoint_file(const std::filesystem::path& path,
                                const std::optional<std::string>& expected_fingerprint = std::nullopt);

}  // namespace meridian::daemon

#include "daemon/checkpoint/checkpoint.h"

#include <zlib.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "daemon/files/safe_file.h"

namespace meridian::daemon {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format stores floats in host order, which must be little-endian");

constexpr std::array<char, 8> kMagic = {'M', 'R', 'D', 'N', 'C', 'K', 'P', 'T'};
constexpr std::array<char, 4> kEndMark = {'E', 'N', 'D', 'C'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr std::size_t kSectionHeaderBytes = 4 + 4 + 8;
constexpr std::size_t kTrailerBytes = 4 + 4;

enum class Section : std::uint32_t {
  kParameters = 1,
  kOptimizerState = 2,  // one per named state
  kPushSumWeight = 3,   // f64
  kProgress = 4,        // u64 step, u64 epoch, u64 data position
  kRngState = 5,
  kModelFingerprint = 6,
  kAlgorithm = 7,
  kRunRounds = 8,              // u64 start round, u64 end round (optional)
  kPushSumWeightAverage = 9,   // f64 (optional)
  kModelState = 10,            // floats (optional)
  kInputStandardization = 11,  // the means, then as many standard deviations (optional)
  kModelFile = 12,             // text (optional)
  kInputDescription = 13,      // see encode_input_description (optional)
  kPrivacyBudget = 14,         // DP-SGD's spent budget with its own keyed check (optional; daemon/privacy_budget.h)
};

// The input description's own format version: a reader leaves a newer one's description empty.
constexpr std::uint32_t kInputDescriptionVersion = 1;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// The input description: u32 version, then feature names, class names, u8 whether a table schema
// follows and, when one does, its label column, numeric columns, u8 missing indicators, ignored
// columns and u32 category column count, each column's name and categories. A string is u32 length
// and bytes; a list of strings is u32 count and the strings.
void put_string(std::string& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}
void put_strings(std::string& out, const std::vector<std::string>& list) {
  put_u32(out, static_cast<std::uint32_t>(list.size()));
  for (const auto& s : list) put_string(out, s);
}

std::string encode_input_description(const InputDescription& d) {
  std::string out;
  put_u32(out, kInputDescriptionVersion);
  put_strings(out, d.feature_names);
  put_strings(out, d.class_names);
  out.push_back(d.table ? '\1' : '\0');
  if (d.table) {
    put_string(out, d.table->label);
    put_strings(out, d.table->numeric);
    out.push_back(d.table->missing_indicators ? '\1' : '\0');
    put_strings(out, d.table->ignored);
    put_u32(out, static_cast<std::uint32_t>(d.table->categorical.size()));
    for (const auto& column : d.table->categorical) {
      put_string(out, column.name);
      put_strings(out, column.categories);
    }
  }
  return out;
}

// Reads what encode_input_description wrote; every length is checked against the bytes there.
// Throws std::out_of_range for a payload that ends early or holds more than it should.
class DescriptionReader {
 public:
  DescriptionReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint32_t u32() {
    need(4);
    const auto v = get_u32(data_ + pos_);
    pos_ += 4;
    return v;
  }
  bool flag() {
    need(1);
    const auto v = data_[pos_++];
    if (v > 1) throw std::out_of_range("a flag is neither 0 nor 1");
    return v == 1;
  }
  std::string string() {
    const std::uint32_t length = u32();
    need(length);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return s;
  }
  std::vector<std::string> strings() {
    const std::uint32_t count = u32();
    // Each string takes at least its 4-byte length: a count beyond that cannot be real.
    if (count > (size_ - pos_) / 4) throw std::out_of_range("a list is longer than the section");
    std::vector<std::string> list;
    list.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) list.push_back(string());
    return list;
  }
  bool at_end() const { return pos_ == size_; }

 private:
  void need(std::size_t n) const {
    if (n > size_ - pos_) throw std::out_of_range("the section ends early");
  }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

InputDescription decode_input_description(const std::uint8_t* data, std::size_t size) {
  DescriptionReader in(data, size);
  InputDescription d;
  if (in.u32() != kInputDescriptionVersion) return d;  // a newer writer's: this reader cannot read it
  d.feature_names = in.strings();
  d.class_names = in.strings();
  if (in.flag()) {
    models::data::TableSchema table;
    table.label = in.string();
    table.numeric = in.strings();
    table.missing_indicators = in.flag();
    table.ignored = in.strings();
    const std::uint32_t columns = in.u32();
    for (std::uint32_t i = 0; i < columns; ++i) {
      models::data::CategoryColumn column;
      column.name = in.string();
      column.categories = in.strings();
      table.categorical.push_back(std::move(column));
    }
    d.table = std::move(table);
  }
  if (!in.at_end()) throw std::out_of_range("bytes after its end");
  return d;
}

// A section before it is written: small metadata is held here, large payloads are borrowed.
struct PendingSection {
  Section kind;
  std::string name;
  std::string inline_payload;              // used when `borrowed` is empty
  std::span<const std::uint8_t> borrowed;  // parameters, optimizer state, RNG state
  std::size_t payload_size() const { return borrowed.empty() ? inline_payload.size() : borrowed.size(); }
};

std::span<const std::uint8_t> bytes_of(std::span<const float> values) {
  return {reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()};
}

std::vector<PendingSection> layout(const CheckpointView& data) {
  std::vector<PendingSection> sections;
  sections.push_back({Section::kParameters, "parameters", {}, bytes_of(data.parameters)});
  for (const auto& state : data.optimizer_state) {
    sections.push_back({Section::kOptimizerState, state.name, {}, bytes_of(state.values)});
  }
  std::string weight(sizeof(double), '\0');
  std::memcpy(weight.data(), &data.push_sum_weight, sizeof(double));
  sections.push_back({Section::kPushSumWeight, "push_sum_weight", weight, {}});
  std::string weight_average(sizeof(double), '\0');
  std::memcpy(weight_average.data(), &data.push_sum_weight_average, sizeof(double));
  sections.push_back({Section::kPushSumWeightAverage, "push_sum_weight_average", weight_average, {}});
  std::string progress;
  put_u64(progress, data.step);
  put_u64(progress, data.epoch);
  put_u64(progress, data.data_position);
  sections.push_back({Section::kProgress, "progress", progress, {}});
  sections.push_back({Section::kRngState, "rng_state", {}, data.rng_state});
  sections.push_back({Section::kModelFingerprint, "model_fingerprint", data.model_fingerprint, {}});
  sections.push_back({Section::kAlgorithm, "algorithm", data.algorithm, {}});
  std::string rounds;
  put_u64(rounds, data.start_round);
  put_u64(rounds, data.end_round);
  sections.push_back({Section::kRunRounds, "run_rounds", rounds, {}});
  if (!data.model_state.empty())
    sections.push_back({Section::kModelState, "model_state", {}, bytes_of(data.model_state)});
  if (!data.input_mean.empty()) {
    // One section for both halves, so that a file cannot hold means without standard deviations.
    std::string standardization(data.input_mean.size_bytes() + data.input_stddev.size_bytes(), '\0');
    std::memcpy(standardization.data(), data.input_mean.data(), data.input_mean.size_bytes());
    std::memcpy(standardization.data() + data.input_mean.size_bytes(), data.input_stddev.data(),
                data.input_stddev.size_bytes());
    sections.push_back({Section::kInputStandardization, "input_standardization", standardization, {}});
  }
  if (!data.model_file.empty()) sections.push_back({Section::kModelFile, "model_file", data.model_file, {}});
  if (!data.inputs.empty()) {
    sections.push_back(
        {Section::kInputDescription, "input_description", encode_input_description(data.inputs), {}});
  }
  if (!data.privacy_budget.empty())
    sections.push_back({Section::kPrivacyBudget, "privacy_budget", {}, data.privacy_budget});
  return sections;
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// Writes and checksums the whole file to `fd`; returns 0 or the errno.
int write_contents(int fd, const std::vector<PendingSection>& sections) {
  std::uint64_t total = kHeaderBytes + kTrailerBytes;
  for (const auto& s : sections) total += kSectionHeaderBytes + s.name.size() + s.payload_size();

  uLong crc = crc32_z(0L, Z_NULL, 0);
  auto emit = [&](const std::uint8_t* p, std::size_t n) {
    crc = crc32_z(crc, p, n);
    return write_all(fd, p, n);
  };
  auto emit_string = [&](const std::string& s) {
    return emit(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };

  std::string header(kMagic.begin(), kMagic.end());
  put_u32(header, kCheckpointVersion);
  put_u32(header, static_cast<std::uint32_t>(sections.size()));
  put_u64(header, total);
  if (int err = emit_string(header)) return err;
  for (const auto& s : sections) {
    std::string head;
    put_u32(head, static_cast<std::uint32_t>(s.kind));
    put_u32(head, static_cast<std::uint32_t>(s.name.size()));
    put_u64(head, s.payload_size());
    head += s.name;
    if (int err = emit_string(head)) return err;
    const int err = s.borrowed.empty() ? emit_string(s.inline_payload) : emit(s.borrowed.data(), s.borrowed.size());
    if (err) return err;
  }
  std::string trailer;
  put_u32(trailer, static_cast<std::uint32_t>(crc));
  trailer.append(kEndMark.begin(), kEndMark.end());
  return write_all(fd, reinterpret_cast<const std::uint8_t*>(trailer.data()), trailer.size());
}

}  // namespace

const std::vector<float>* Checkpoint::find_optimizer_state(const std::string& name) const {
  for (const auto& state : optimizer_state) {
    if (state.name == name) return &state.values;
  }
  return nullptr;
}

CheckpointView Checkpoint::view() const {
  CheckpointView v;
  v.parameters = parameters;
  for (const auto& state : optimizer_state) v.optimizer_state.push_back({state.name, state.values});
  v.push_sum_weight = push_sum_weight;
  v.push_sum_weight_average = push_sum_weight_average;
  v.step = step;
  v.epoch = epoch;
  v.data_position = data_position;
  v.rng_state = rng_state;
  v.model_fingerprint = model_fingerprint;
  v.algorithm = algorithm;
  v.start_round = start_round;
  v.end_round = end_round;
  v.model_state = model_state;
  v.input_mean = input_mean;
  v.input_stddev = input_stddev;
  v.model_file = model_file;
  v.inputs = inputs;
  v.privacy_budget = privacy_budget;
  return v;
}

std::optional<std::string> write_checkpoint_file(const std::filesystem::path& path, const CheckpointView& data) {
  const auto sections = layout(data);
  auto failure = replace_file_with(path, 0600, "checkpoint", [&](int fd) { return write_contents(fd, sections); });
  // A failed directory sync leaves a complete, valid file; only its durability across a power loss
  // is in doubt, which the caller reports like any other problem.
  if (failure) return std::move(failure->message);
  return std::nullopt;
}

Checkpoint read_checkpoint_file(const std::filesystem::path& path,
                                const std::optional<std::string>& expected_fingerprint) {
  const auto bad = [&](const std::string& why) { return CheckpointError("checkpoint " + path.string() + ": " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad("cannot open: " + errno_text(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw bad("cannot read its size: " + ec.message());
  if (size < kHeaderBytes + kTrailerBytes) {
    throw bad("truncated: " + std::to_string(size) + " bytes is shorter than an empty checkpoint");
  }
  std::vector<std::uint8_t> bytes(size);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
    throw bad("read failed after " + std::to_string(in.gcount()) + " of " + std::to_string(size) + " bytes");
  }

  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw bad("not a Meridian checkpoint (wrong magic bytes)");
  }
  const std::uint32_t version = get_u32(bytes.data() + 8);
  if (version != kCheckpointVersion) {
    throw bad("format version " + std::to_string(version) + " is not supported (this build reads version " +
              std::to_string(kCheckpointVersion) + ")");
  }
  const std::uint32_t count = get_u32(bytes.data() + 12);
  const std::uint64_t length = get_u64(bytes.data() + 16);
  if (length != size) {
    throw bad(size < length
                  ? "truncated: " + std::to_string(size) + " bytes, the header says " + std::to_string(length)
                  : "length mismatch: " + std::to_string(size) + " bytes, the header says " + std::to_string(length));
  }
  const std::uint8_t* trailer = bytes.data() + size - kTrailerBytes;
  if (std::memcmp(trailer + 4, kEndMark.data(), kEndMark.size()) != 0) {
    throw bad("end marker missing: the file is corrupt");
  }
  const std::uint32_t stored = get_u32(trailer);
  const auto computed = static_cast<std::uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), bytes.data(), size - kTrailerBytes));
  if (stored != computed) throw bad("checksum mismatch: the file is corrupt");

  // The checksum guards against damage, not against a crafted file (whoever crafts one computes a valid
  // checksum), so every length below is checked against the bytes that are there.
  Checkpoint cp;
  bool have_params = false, have_weight = false, have_progress = false, have_fingerprint = false,
       have_algorithm = false;
  std::size_t pos = kHeaderBytes;
  const std::size_t end = size - kTrailerBytes;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (end - pos < kSectionHeaderBytes) throw bad("section " + std::to_string(i) + " runs past the end");
    const auto kind = static_cast<Section>(get_u32(bytes.data() + pos));
    const std::uint64_t name_len = get_u32(bytes.data() + pos + 4);
    const std::uint64_t payload_len = get_u64(bytes.data() + pos + 8);
    pos += kSectionHeaderBytes;
    if (name_len > end - pos || payload_len > end - pos - name_len) {
      throw bad("section " + std::to_string(i) + " runs past the end");
    }
    std::string name(reinterpret_cast<const char*>(bytes.data() + pos), name_len);
    pos += name_len;
    const std::uint8_t* payload = bytes.data() + pos;
    pos += payload_len;
    auto floats = [&] {
      if (payload_len % sizeof(float) != 0) throw bad("section '" + name + "' is not a whole number of floats");
      std::vector<float> v(payload_len / sizeof(float));
      if (payload_len > 0) std::memcpy(v.data(), payload, payload_len);  // an empty vector's data() may be null
      return v;
    };
    switch (kind) {
      case Section::kParameters:
        cp.parameters = floats();
        have_params = true;
        break;
      case Section::kOptimizerState: cp.optimizer_state.push_back({name, floats()}); break;
      case Section::kPushSumWeight:
        if (payload_len != sizeof(double)) throw bad("push-sum weight section has the wrong size");
        std::memcpy(&cp.push_sum_weight, payload, sizeof(double));
        have_weight = true;
        break;
      case Section::kPushSumWeightAverage:
        if (payload_len != sizeof(double)) throw bad("push-sum weight average section has the wrong size");
        std::memcpy(&cp.push_sum_weight_average, payload, sizeof(double));
        break;
      case Section::kProgress:
        if (payload_len != 24) throw bad("progress section has the wrong size");
        cp.step = get_u64(payload);
        cp.epoch = get_u64(payload + 8);
        cp.data_position = get_u64(payload + 16);
        have_progress = true;
        break;
      case Section::kRngState: cp.rng_state.assign(payload, payload + payload_len); break;
      case Section::kModelFingerprint:
        cp.model_fingerprint.assign(reinterpret_cast<const char*>(payload), payload_len);
        have_fingerprint = true;
        break;
      case Section::kAlgorithm:
        cp.algorithm.assign(reinterpret_cast<const char*>(payload), payload_len);
        have_algorithm = true;
        break;
      case Section::kRunRounds:
        if (payload_len != 16) throw bad("run rounds section has the wrong size");
        cp.start_round = get_u64(payload);
        cp.end_round = get_u64(payload + 8);
        break;
      case Section::kModelState: cp.model_state = floats(); break;
      case Section::kInputStandardization: {
        auto values = floats();
        if (values.size() % 2 != 0) throw bad("input standardization section has an odd number of values");
        cp.input_mean.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2));
        cp.input_stddev.assign(values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
        break;
      }
      case Section::kModelFile: cp.model_file.assign(reinterpret_cast<const char*>(payload), payload_len); break;
      case Section::kInputDescription:
        try {
          cp.inputs = decode_input_description(payload, payload_len);
        } catch (const std::out_of_range& e) {
          throw bad(std::string("input description section is malformed: ") + e.what());
        }
        break;
      case Section::kPrivacyBudget: cp.privacy_budget.assign(payload, payload + payload_len); break;
      default: break;  // a section a newer writer added that this reader does not need
    }
  }
  if (pos != end) throw bad("unexpected bytes after the last section");
  if (!have_params || !have_weight || !have_progress || !have_fingerprint || !have_algorithm) {
    throw bad("a required section is missing");
  }
  if (expected_fingerprint && cp.model_fingerprint != *expected_fingerprint) {
    throw bad("model fingerprint '" + cp.model_fingerprint + "' does not match this model's '" + *expected_fingerprint +
              "' (written for a different model)");
  }
  return cp;
}

}  // namespace meridian::daemon

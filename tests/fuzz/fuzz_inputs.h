// What each libFuzzer target (tests/fuzz/NAME_fuzzer.cc) does with one input, shared with the test that
// replays the kept inputs of tests/fuzz/regressions/NAME/ (tests/daemon/fuzz_regressions_test.cc).
// Each function hands the bytes to the real loader or parser, the way the daemon or the command line
// does, and swallows the refusal it may throw (error::UserError): a crash, a sanitizer report, a hang
// or any other exception is a finding. Loaders that read a path get the bytes in a temporary file.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "daemon/control/roster_file.h"
#include "daemon/site_config.h"
#include "error/error.h"
#include "models/cpu_backend.h"
#include "models/data/csv_reader.h"
#include "models/data/dataset.h"
#include "models/data/idx_reader.h"
#include "models/data/image_file.h"
#include "models/data/npy_array.h"
#include "models/data/npy_reader.h"
#include "models/model_file.h"
#include "peer/roster.h"
#include "tests/fuzz/fuzz_input_file.h"

namespace meridian::tests {

using FuzzBytes = std::span<const std::uint8_t>;

// The test set the checkpoint and model file targets build models for, and that the seed corpora's
// checkpoints were written for: four 1×12×12 images of 3 classes (the smallest input every built-in
// model takes).
inline models::data::Dataset fuzz_image_dataset() {
  models::data::Dataset d;
  d.rows = 4;
  d.channels = 1;
  d.height = 12;
  d.width = 12;
  d.dim = 144;
  d.classes = 3;
  d.features.resize(d.rows * d.dim);
  for (std::size_t i = 0; i < d.features.size(); ++i) d.features[i] = static_cast<float>(i % 7) / 7.0f;
  d.labels = {0, 1, 2, 1};
  return d;
}

// The checkpoint file a checkpoint fuzz input stands for: the input is the file without its trailer,
// and its header's length field is set to the file's length; the CRC-32 and the end mark are appended.
// Mutations would almost never keep a valid checksum, and a checksum guards against damage, not
// against a crafted file, so the fuzzer explores what lies behind it. Inputs shorter than a header
// are kept as they are.
inline std::string sealed_checkpoint(FuzzBytes input) {
  std::string file(reinterpret_cast<const char*>(input.data()), input.size());
  constexpr std::size_t kHeader = 24, kTrailer = 8;
  if (file.size() < kHeader) return file;
  const std::uint64_t length = file.size() + kTrailer;
  for (int i = 0; i < 8; ++i) file[16 + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  const auto crc = static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(file.data()), file.size()));
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return file + "ENDC";
}

// The checkpoint reader and what `meridian eval` does with a checkpoint: read and verify it, rebuild
// its model (from the fingerprint or the stored model file) and evaluate it.
inline void fuzz_checkpoint(FuzzBytes input) {
  static FuzzInputFile file("checkpoint.ckpt");
  static const auto test = fuzz_image_dataset();
  const auto sealed = sealed_checkpoint(input);
  const auto& path = file.write(reinterpret_cast<const std::uint8_t*>(sealed.data()), sealed.size());
  try {
    daemon::evaluate_checkpoints({path}, test);
  } catch (const error::UserError&) {
  }
}

// A model file's text, parsed for fuzz_image_dataset()'s images and classes; a model it describes
// evaluates that set.
inline void fuzz_model_file(FuzzBytes input) {
  static const auto backend = std::make_shared<models::CpuBackend>(1);
  static const auto test = fuzz_image_dataset();
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    auto model =
        models::parse_model_file(text, "fuzz", {test.channels, test.height, test.width}, test.classes, backend, 1);
    model->evaluate(test);
  } catch (const error::UserError&) {
  }
}

// A roster file's text: parsed, printed and parsed again (the edits rely on the round trip), its first
// site removed, and a site added to it.
inline void fuzz_roster(FuzzBytes input) {
  const std::string text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    const auto roster = peer::Roster::parse(text, "fuzz");
    if (peer::Roster::parse(roster.to_text(), "fuzz printed").entries().size() != roster.entries().size()) {
      std::abort();
    }
    if (!roster.entries().empty()) daemon::roster_text_removing(text, roster.entries().front().name, "fuzz");
  } catch (const error::UserError&) {
  }
  try {
    daemon::roster_text_adding(text, {"fuzz-site", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", "tcp://127.0.0.1:7400"},
                               "fuzz");
  } catch (const error::UserError&) {
  }
}

// A site configuration file (`meridian start --config`): read on top of the defaults, then checked and
// typed as `meridian start` does.
inline void fuzz_site_config(FuzzBytes input) {
  static FuzzInputFile file("site.toml");
  const auto& path = file.write(input.data(), input.size());
  try {
    daemon::parse_site_settings(daemon::read_site_config_file(path));
  } catch (const error::UserError&) {
  }
}

// A CSV file (plain or gzip-compressed), read with a header, and without one with a given class list.
inline void fuzz_csv(FuzzBytes input) {
  static FuzzInputFile file("table.csv");
  const auto& path = file.write(input.data(), input.size());
  try {
    models::data::read_csv(path);
  } catch (const error::UserError&) {
  }
  try {
    models::data::CsvOptions options;
    options.header = false;
    options.label_index = 0;
    options.class_names = {"0", "1", "yes"};
    models::data::read_csv(path, options);
  } catch (const error::UserError&) {
  }
}

// The two parts of a two-file input: the first two bytes give the length of the first part
// (little-endian, cut to what there is), the rest is the second part.
struct SplitInput {
  FuzzBytes first, second;
};
inline SplitInput split_input(FuzzBytes input) {
  if (input.size() < 2) return {};
  const std::size_t first = std::min<std::size_t>(input.size() - 2, input[0] | (std::size_t{input[1]} << 8));
  return {input.subspan(2, first), input.subspan(2 + first)};
}

// NumPy data: an input that starts like a zip archive ("PK") is read as an .npz (both arrays); any
// other is split (split_input) into a features .npy and a labels .npy. Each is read for every layout.
inline void fuzz_npy(FuzzBytes input) {
  namespace md = models::data;
  constexpr md::ArrayLayout kLayouts[] = {md::ArrayLayout::kUnstated, md::ArrayLayout::kNchw, md::ArrayLayout::kNhwc};
  if (input.size() >= 2 && input[0] == 'P' && input[1] == 'K') {
    static FuzzInputFile file("arrays.npz");
    const auto& path = file.write(input.data(), input.size());
    for (auto layout : kLayouts) {
      try {
        md::NpyOptions options;
        options.layout = layout;
        md::read_npz(path, options);
      } catch (const error::UserError&) {
      }
    }
    return;
  }
  const auto [features_bytes, labels_bytes] = split_input(input);
  for (auto layout : kLayouts) {
    try {
      const auto features = md::parse_npy(
          std::string(reinterpret_cast<const char*>(features_bytes.data()), features_bytes.size()), "x.npy");
      const auto labels =
          md::parse_npy(std::string(reinterpret_cast<const char*>(labels_bytes.data()), labels_bytes.size()), "y.npy");
      md::NpyOptions options;
      options.layout = layout;
      md::dataset_from_arrays(features, "x.npy", labels, "y.npy", options);
      options.class_names = {"a", "b", "c"};
      md::dataset_from_arrays(features, "x.npy", labels, "y.npy", options);
    } catch (const error::UserError&) {
    }
  }
}

// IDX data: the input is split (split_input) into an images file and a labels file (each raw or
// gzip-compressed); the pair is read whole and with a selection of every other row.
inline void fuzz_idx(FuzzBytes input) {
  static FuzzInputFile images("images-idx3-ubyte");
  static FuzzInputFile labels("labels-idx1-ubyte");
  const auto [images_bytes, labels_bytes] = split_input(input);
  const auto& images_path = images.write(images_bytes.data(), images_bytes.size());
  const auto& labels_path = labels.write(labels_bytes.data(), labels_bytes.size());
  try {
    models::data::read_idx(images_path, labels_path);
  } catch (const error::UserError&) {
  }
  try {
    models::data::read_idx(images_path, labels_path, 10, [](std::span<const std::int32_t> all) {
      std::vector<std::size_t> rows;
      for (std::size_t i = 0; i < all.size(); i += 2) rows.push_back(i);
      return rows;
    });
  } catch (const error::UserError&) {
  }
}

// A PNG or JPEG file (told by its first bytes): probed, and decoded to gray and to RGB.
inline void fuzz_image_file(FuzzBytes input) {
  static FuzzInputFile file("image");
  const auto& path = file.write(input.data(), input.size());
  try {
    models::data::probe_image(path);
  } catch (const error::UserError&) {
  }
  for (std::size_t channels : {1, 3}) {
    try {
      models::data::decode_image(path, channels);
    } catch (const error::UserError&) {
    }
  }
}

}  // namespace meridian::tests

// How a site scales its inputs before training (--normalize, --input-mean, --input-std): the same
// values on every site of a federation, either given by the operator or computed once over the
// federation from each site's moments (feature_moments.h), and saved in the checkpoints
// (docs/datasets.md).
//
//   auto        (default) from the federation for tables, none for images (pixels stay in [0, 1])
//   federation  per feature for tables, per channel for images, from every site's moments
//   none        the inputs as read
//   given       --input-mean and --input-std: one value per feature (tables) or channel (images)
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/data/dataset.h"

namespace meridian::models::data {

enum class NormalizationSource { kAuto, kFederation, kNone, kGiven };

struct NormalizationSpec {
  NormalizationSource source = NormalizationSource::kAuto;
  std::vector<double> mean, stddev;  // kGiven only: one value per feature or channel
};

// Parses --normalize (auto | federation | none) and the lists --input-mean and --input-std (numbers
// separated by commas; both or neither; they make the source kGiven and go with auto only). Throws
// error::UserError naming the text (and the option, for the lists).
NormalizationSpec parse_normalization_spec(std::string_view normalize, std::string_view mean, std::string_view stddev);

// The source in force for `data`: kAuto resolved (kFederation for tables, kNone for images).
NormalizationSource normalization_source(const NormalizationSpec& spec, const Dataset& data);

// Canonical text for the federation terms and the start-up log: "none", "from the federation, per
// feature", "given, per channel: mean 0.5, 0.25; std 0.5, 0.5". Equal specs give equal text.
std::string describe_normalization(const NormalizationSpec& spec, const Dataset& data);

}  // namespace meridian::models::data

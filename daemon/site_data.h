// The data one site trains and evaluates on, and how long the run is.
//
// Run length rule (every site computes the same number without talking): a training step is one
// local batch, and an epoch is floor(rows of the whole training set / site-count / batch) steps
// (at least 1), whatever the size of this site's own part; the run is floor(epochs × that) steps
// (at least 1). With an uneven split (Dirichlet partitions) a site simply starts its next pass over
// its own rows earlier or later: all sites take the same number of steps, which the synchronous
// algorithms need.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_config.h"
#include "models/data/dataset.h"
#include "models/data/feature_moments.h"

namespace meridian::daemon {

struct SiteData {
  models::data::Dataset train;  // this site's part
  models::data::Dataset test;   // the whole test set (rows == 0: none, no accuracy is reported)
  std::size_t whole_train_rows = 0;
  std::uint64_t steps_per_epoch = 0;
  std::uint64_t total_steps = 0;
  // Input scaling (models/data/normalization_spec.h). A given normalization is applied by
  // load_site_data already; one from the federation is pending until the sites have agreed on it
  // (daemon/normalization_agreement.cc), with this site's part's moments to contribute.
  bool normalization_pending = false;
  models::data::FeatureMoments moments;  // of the unscaled training part; set when pending
};

// Loads the configured data (--train/--test through models/data/data_source.h, else --dataset; the
// old CSV options were folded into --train/--test by parse_site_settings, and their deprecation
// warning is printed here),
// keeps this site's part (partition, site-index, site-count, seed), scales it as --normalize says (or
// leaves it pending, see SiteData) and applies the run length rule. Throws
// models::data::DataError naming the file or the problem, also when --augment is on and the training data has no image
// geometry.
SiteData load_site_data(const SiteSettings& settings);

// Scales the training part and the test set with `scaling` (per feature, of the data's width) and
// records it as their Dataset::standardization; clears normalization_pending. Throws DataError when
// `scaling` has another width than the data.
void apply_normalization(SiteData& data, const models::data::Standardization& scaling);

// "benign 0, malignant 34" (class names, or numbers where the data has none): the rows of each class
// in `data`, for the start-up log.
std::string class_counts(const models::data::Dataset& data);

// Loads only the test set: --test when given (read with --classes and --layout and, when --train is
// given too, with the training data's class list), else that of `config`'s dataset (fashion-mnist /
// idx: the t10k files). The old CSV options (--train-csv, --test-csv) are read as --train and --test
// (models::data::fold_legacy_csv_names), with the deprecation warning printed. Scaled with `scaling`
// when it is not empty (a checkpoint's input standardization), else as before checkpoints carried one:
// tables with the training file's statistics, images not at all. `trained` is what the model was
// trained on (a checkpoint's input description): a --test is labelled with its class list unless
// --classes or --train is given, and a table is read with its schema (columns matched by name, its
// ignored, category and label columns) unless --train or a table option is given. Throws DataError,
// also when the data has no test set, `config.dataset` names none of these, `scaling` has another
// width than the data, or the test data's class list is not the trained one.
models::data::Dataset load_test_data(const SiteConfig& config, const models::data::Standardization& scaling = {},
                                     const InputDescription& trained = {});

}  // namespace meridian::daemon

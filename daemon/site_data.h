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

#include "daemon/site_config.h"
#include "models/data/dataset.h"

namespace meridian::daemon {

struct SiteData {
  models::data::Dataset train;  // this site's part
  models::data::Dataset test;   // the whole test set (rows == 0: none, no accuracy is reported)
  std::size_t whole_train_rows = 0;
  std::uint64_t steps_per_epoch = 0;
  std::uint64_t total_steps = 0;
};

// Loads the configured data (--train/--test through models/data/data_source.h, else --dataset),
// keeps this site's part (partition, site-index, site-count, seed) and applies the run length rule. Throws
// models::data::DataError naming the file or the problem, also when --augment is on and the training data has no image
// geometry.
SiteData load_site_data(const SiteSettings& settings);

// Loads only the test set: --test when given (read with --classes and --layout and, when --train is
// given too, with the training data's class list and scaling), else that of `config`'s dataset
// (fashion-mnist / idx: the t10k files; csv: --test-csv, scaled with the training file's statistics).
// Throws DataError, also when the data has no test set or `config.dataset` names none of these.
models::data::Dataset load_test_data(const SiteConfig& config);

}  // namespace meridian::daemon

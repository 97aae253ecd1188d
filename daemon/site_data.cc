#include "daemon/site_data.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "error/error.h"
#include "models/data/data_source.h"
#include "models/data/image_augmentation.h"
#include "models/data/idx_reader.h"
#include "models/data/partition.h"

namespace meridian::daemon {
namespace {

struct Loaded {
  models::data::Dataset train, test;
};

// The packaged datasets (fashion-mnist and idx) both read the four IDX files of the MNIST layout from
// --data-dir. `select_train` picks the site's rows of the training set (empty: all of them).
Loaded load_idx_files(const SiteConfig& config, bool want_train, const models::data::RowSelection& select_train = {}) {
  Loaded out;
  if (want_train) out.train = models::data::load_fashion_mnist(config.data_dir, true, select_train);
  out.test = models::data::load_fashion_mnist(config.data_dir, false);
  return out;
}

// Prints the deprecation warning of the old CSV options, when they are used.
void warn_legacy_csv_form(const SiteConfig& config) {
  SiteConfig copy = config;
  const auto fold = models::data::fold_legacy_csv_names(copy.train, copy.test, copy.train_csv, copy.test_csv);
  if (!fold.warning.empty()) spdlog::warn("{}", fold.warning);
}

models::data::DataOptions data_options(const SiteSettings& settings, models::data::RowSelection select,
                                       bool standardize) {
  models::data::DataOptions options;
  options.standardize = standardize;
  options.class_names = settings.class_names;
  options.layout = settings.layout;
  options.label_column = settings.options.label_column;
  options.tabular = settings.tabular;
  options.select = std::move(select);
  return options;
}

// With the inputs left as read (--normalize none) there is no agreed mean to fill a missing value with.
void refuse_unfilled_missing(const SiteData& data, const SiteConfig& config) {
  for (const auto& [part, path] : {std::pair{&data.train, &config.train}, std::pair{&data.test, &config.test}}) {
    const std::size_t missing = models::data::count_missing(part->features);
    if (missing == 0) continue;
    throw models::data::DataError(*path + ": has " + std::to_string(missing) +
                                  " missing values, and --normalize none leaves nothing to fill them with: use "
                                  "--normalize auto (they are filled with the federation's mean of each column)");
  }
}

// "low, medium, high".
std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

SiteData load_site_data(const SiteSettings& settings) {
  const SiteConfig& config = settings.options;
  warn_legacy_csv_form(config);
  const auto sites = static_cast<std::size_t>(config.site_count);
  const auto site = static_cast<std::size_t>(config.site_index);
  const auto spec = sites > 1 ? settings.partition : models::data::PartitionSpec{};
  SiteData out;
  // IDX images are converted for this site's rows only: with 16 sites on one machine each would
  // otherwise hold all 60000 rows as floats (188 MB) for a moment.
  bool partitioned = false;
  models::data::RowSelection select;
  if (sites > 1 && config.train.empty()) {
    select = [&](std::span<const std::int32_t> labels) {
      out.whole_train_rows = labels.size();
      partitioned = true;
      return models::data::rows_of_site(labels, models::data::kFashionMnistClasses, spec, site, sites, config.seed);
    };
  }
  Loaded loaded;
  if (!config.train.empty()) {
    // Every format takes the selection: IDX converts only the kept rows, the others read all and keep
    // them. The partition needs the class count before the data is read: the class list's when given
    // (so every site splits alike), else the labels' own.
    select = sites > 1 ? models::data::RowSelection([&](std::span<const std::int32_t> labels) {
      out.whole_train_rows = labels.size();
      partitioned = true;
      std::size_t classes = settings.class_names.size();
      if (classes == 0)
        for (const auto label : labels) classes = std::max(classes, static_cast<std::size_t>(label) + 1);
      return models::data::rows_of_site(labels, classes, spec, site, sites, config.seed);
    })
                       : models::data::RowSelection{};
    auto both = models::data::load_train_and_test(config.train, config.test, data_options(settings, select, false));
    loaded.train = std::move(both.train);
    loaded.test = std::move(both.test);
  } else {
    loaded = load_idx_files(config, true, select);
  }
  // The trainer builds the same augmentation before its first step; building it here refuses a
  // table with --augment at start-up, before the site joins anyone.
  try {
    (void)models::data::ImageAugmentation(loaded.train, settings.augmentation, config.seed);
  } catch (const models::data::DataError& e) {
    throw models::data::DataError(std::string("--augment: ") + e.what());
  }
  if (!partitioned) out.whole_train_rows = loaded.train.rows;
  out.train = sites > 1 && !partitioned ? models::data::partition(loaded.train, spec, site, sites, config.seed)
                                        : std::move(loaded.train);
  out.test = std::move(loaded.test);
  // Every format is read unscaled; the scaling --normalize asks for is the same on every site.
  switch (models::data::normalization_source(settings.normalization, out.train)) {
    case models::data::NormalizationSource::kGiven:
      apply_normalization(out, models::data::standardization_from(settings.normalization.mean,
                                                                  settings.normalization.stddev, out.train));
      break;
    case models::data::NormalizationSource::kFederation:
      out.normalization_pending = true;
      out.moments = models::data::moments_of(out.train);
      break;
    case models::data::NormalizationSource::kNone:
    case models::data::NormalizationSource::kAuto: refuse_unfilled_missing(out, config); break;
  }
  out.steps_per_epoch =
      std::max<std::uint64_t>(1, out.whole_train_rows / sites / static_cast<std::size_t>(config.batch));
  out.total_steps = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::floor(config.epochs * static_cast<double>(out.steps_per_epoch))));
  return out;
}

void apply_normalization(SiteData& data, const models::data::Standardization& scaling) {
  for (auto* part : {&data.train, &data.test}) {
    if (part->rows == 0 && part->features.empty()) {
      part->standardization = scaling;
      continue;
    }
    if (scaling.mean.size() != part->dim || scaling.stddev.size() != part->dim) {
      throw models::data::DataError("the input scaling has " + std::to_string(scaling.mean.size()) +
                                    " values per row, the data " + std::to_string(part->dim) + " features");
    }
    scaling.apply(part->features);
    part->standardization = scaling;
  }
  data.normalization_pending = false;
}

std::string class_counts(const models::data::Dataset& data) {
  std::vector<std::size_t> counts(data.classes, 0);
  for (const auto label : data.labels)
    if (label >= 0 && static_cast<std::size_t>(label) < counts.size()) ++counts[static_cast<std::size_t>(label)];
  std::string out;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (!out.empty()) out += ", ";
    out += k < data.class_names.size() ? data.class_names[k] : std::to_string(k);
    out += ' ';
    out += std::to_string(counts[k]);
  }
  return out;
}

models::data::Dataset load_test_data(const SiteConfig& given, const models::data::Standardization& scaling,
                                     const InputDescription& trained) {
  SiteConfig config = given;
  const auto fold = models::data::fold_legacy_csv_names(config.train, config.test, config.train_csv, config.test_csv);
  if (!fold.problems.empty()) throw models::data::DataError(fold.problems.front());
  if (!fold.warning.empty()) spdlog::warn("{}", fold.warning);
  // A checkpoint's scaling replaces the training file's: the data are read as they are, then scaled.
  const bool standardize = scaling.empty();
  auto scaled = [&](models::data::Dataset test) {
    if (standardize) return test;
    if (scaling.mean.size() != test.dim || scaling.stddev.size() != test.dim) {
      throw models::data::DataError("the checkpoint's input scaling has " + std::to_string(scaling.mean.size()) +
                                    " values per row, the test data " + std::to_string(test.dim) + " features");
    }
    scaling.apply(test.features);
    test.standardization = scaling;
    return test;
  };
  if (!config.test.empty()) {
    // The options as given (for `meridian eval`, which has no site to validate): parsed here, their
    // errors named by option.
    SiteSettings settings;
    settings.options = config;
    try {
      if (!config.classes.empty()) settings.class_names = models::data::parse_class_list(config.classes);
      if (!config.layout.empty()) settings.layout = models::data::parse_array_layout(config.layout);
    } catch (const error::UserError& e) {
      throw models::data::DataError(std::string(config.classes.empty() ? "--layout: " : "--classes or --layout: ") +
                                    e.what());
    }
    try {
      settings.tabular =
          models::data::parse_tabular_spec(config.ignore_columns, config.categorical, config.missing_indicators);
    } catch (const error::UserError& e) {
      throw models::data::DataError(e.what());
    }
    if (settings.class_names.empty() && config.train.empty()) settings.class_names = trained.class_names;
    auto options = data_options(settings, {}, standardize);
    if (trained.table && config.train.empty() && settings.tabular.empty()) {
      options.schema = trained.table;
      options.schema_from = "the checkpoint's model";
      if (config.label_column == SiteConfig{}.label_column) options.label_column = trained.table->label;
    }
    auto test = config.train.empty() ? models::data::load_dataset(config.test, options)
                                     : models::data::load_train_and_test(config.train, config.test, options).test;
    // Labels numbered in another order than the model's outputs would score a good model as a bad one.
    if (!trained.class_names.empty() && !test.class_names.empty() && test.class_names != trained.class_names) {
      throw models::data::DataError(
          config.test + ": its class list (" + comma_list(test.class_names) +
          ") is not the one the model was trained with (" + comma_list(trained.class_names) +
          "), which gives the order of its outputs: leave out --classes and --train to use the model's list");
    }
    return scaled(std::move(test));
  }
  if (!config.train.empty()) throw models::data::DataError("--train " + config.train + " has no test set: give --test");
  const auto dataset = parse_dataset(config.dataset);
  if (!dataset) throw models::data::DataError("--dataset '" + config.dataset + "' is not fashion-mnist, idx or csv");
  if (*dataset == Dataset::kCsv) throw models::data::DataError("--dataset csv names no test file: give --test FILE.csv");
  return scaled(load_idx_files(config, false).test);
}

}  // namespace meridian::daemon

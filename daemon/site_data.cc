#include "daemon/site_data.h"

#include <algorithm>
#include <cmath>

#include "models/data/csv_reader.h"
#include "models/data/idx_reader.h"
#include "models/data/partition.h"

namespace meridian::daemon {
namespace {

models::data::CsvOptions csv_options(const SiteConfig& config) {
  models::data::CsvOptions options;
  const bool numeric = !config.label_column.empty() &&
                       std::all_of(config.label_column.begin(), config.label_column.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  if (numeric) {
    options.label_index = std::stoul(config.label_column);
  } else {
    options.label_column = config.label_column;
  }
  return options;
}

struct Loaded {
  models::data::Dataset train, test;
};

Loaded load(const SiteConfig& config, bool want_train) {
  Loaded out;
  if (config.dataset == "csv") {
    auto train = models::data::read_csv(config.train_csv, csv_options(config));
    if (!config.test_csv.empty()) {
      auto options = csv_options(config);
      options.standardization = train.standardization;
      options.class_names = train.class_names;
      out.test = models::data::read_csv(config.test_csv, options);
    }
    if (want_train) out.train = std::move(train);
    return out;
  }
  // fashion-mnist and idx both read the four IDX files of the MNIST layout from --data-dir.
  if (want_train) out.train = models::data::load_fashion_mnist(config.data_dir, true);
  out.test = models::data::load_fashion_mnist(config.data_dir, false);
  return out;
}

}  // namespace

SiteData load_site_data(const SiteConfig& config) {
  Loaded loaded = load(config, true);
  SiteData out;
  out.whole_train_rows = loaded.train.rows;
  const auto sites = static_cast<std::size_t>(config.site_count);
  out.train = sites > 1 ? models::data::partition(loaded.train, models::data::parse_partition_spec(config.partition),
                                                  static_cast<std::size_t>(config.site_index), sites, config.seed)
                        : std::move(loaded.train);
  out.test = std::move(loaded.test);
  out.steps_per_epoch = std::max<std::uint64_t>(1, out.whole_train_rows / sites / static_cast<std::size_t>(config.batch));
  out.total_steps = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::floor(config.epochs * static_cast<double>(out.steps_per_epoch))));
  return out;
}

models::data::Dataset load_test_data(const SiteConfig& config) {
  if (config.dataset == "csv" && config.test_csv.empty()) {
    throw models::data::DataError("--dataset csv has no test set: give --test-csv");
  }
  return load(config, config.dataset == "csv").test;
}

}  // namespace meridian::daemon

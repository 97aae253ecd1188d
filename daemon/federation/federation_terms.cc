#include "daemon/federation/federation_terms.h"

#include <sstream>

#include "daemon/algorithms/registry.h"

namespace meridian::daemon {

namespace {

// Shortest text of a knob's value ("0.9", "4"), the same on every site for the same value.
std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// "input 1x28x28, 10 classes (T-shirt, ...)": the input shape, the class count and the class names.
std::string data_term(const models::data::Dataset& train) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, its bug 105329) on "literal" + string.
  std::string data = "input ";
  if (train.channels > 0) {
    data += std::to_string(train.channels);
    data += 'x';
    data += std::to_string(train.height);
    data += 'x';
    data += std::to_string(train.width);
  } else {
    data += std::to_string(train.dim);
  }
  data += ", ";
  data += std::to_string(train.classes);
  data += " classes";
  for (std::size_t i = 0; i < train.class_names.size(); ++i) {
    data += i == 0 ? " (" : ", ";
    data += train.class_names[i];
  }
  if (!train.class_names.empty()) data += ')';
  return data;
}

// The algorithm with its shape, and robust aggregation with its clip and trim.
std::string algorithm_term(const SiteSettings& settings) {
  const auto& o = settings.options;
  std::string algorithm = describe_algorithm(settings);
  if (o.robust_aggregation) {
    algorithm += " (clip ";
    algorithm += number(o.robust_clip);
    algorithm += ", trim ";
    algorithm += std::to_string(o.robust_trim);
    algorithm += ')';
  }
  return algorithm;
}

// Masked and unmasked shares cannot meet in one sum: every site masks, or none does. The value names
// the mask layout (privacy/pairwise_mask.h) and the share's wire layout (privacy/packed_share.h) too:
// masks drawn another way would not cancel, and shares laid out another way would never be summed, so
// builds that differ in either refuse each other at join.
peer::Term secure_aggregation_term(const SiteSettings& settings) {
  return {"secure-aggregation",
          settings.options.secure_aggregation ? "on (48-bit masks, 6-byte lanes on the wire)" : "off",
          {}, "give every site the same --secure-aggregation, from the same Meridian release"};
}

// "DP-SGD epsilon 3, delta 1e-05, clip 1" (with "noise multiplier S" where it is given rather than
// derived from each site's data), or "none": a site's guarantee is only as good as its federation's
// agreement that every site clips and adds noise, so a site without DP never joins a DP federation.
std::string privacy_term(const SiteConfig& c) {
  if (!c.dp()) return "none";
  std::string term = "DP-SGD";
  if (c.dp_epsilon > 0) term += " epsilon " + number(c.dp_epsilon) + ",";
  if (c.dp_noise_multiplier > 0) term += " noise multiplier " + number(c.dp_noise_multiplier) + ",";
  term += " delta " + number(c.dp_delta) + ", clip " + number(c.dp_clip);
  return term;
}

}  // namespace

peer::FederationTerms federation_terms(const SiteSettings& settings, const models::Model& model,
                                       const models::data::Dataset& train) {
  peer::FederationTerms terms;
  // The data's schema first: a site with another table is told about its columns, not about the
  // model its column count builds.
  // Category lists before the columns they expand into: a site that saw another set of categories is
  // told which, and that --categorical NAME=a|b|c declares the full list at every site.
  if (train.table && !train.table->categorical.empty())
    terms.push_back({"categories", train.table->describe_categories(), {},
                     "declare each column's full list at every site with --categorical NAME=a|b|c"});
  if (!train.feature_names.empty()) {
    std::string columns = "[";
    for (std::size_t i = 0; i < train.feature_names.size(); ++i) {
      if (i > 0) columns += ", ";
      columns += train.feature_names[i];
    }
    columns += ']';
    terms.push_back({"columns", columns, {},
                     "every site needs the same columns (in any order); leave extra ones out with --ignore-columns"});
  }
  // Sites that each derive their classes from their own labels differ when one lacks a class. The fix
  // is named whether or not this site declared its list: the site it reaches may be the one that did not.
  terms.push_back({"data", data_term(train), {}, "give every site the same full class list with --classes a,b,c"});
  terms.push_back({"normalization", models::data::describe_normalization(settings.normalization, train)});
  terms.push_back({"model", model.fingerprint(), model.summary()});

  const auto& o = settings.options;
  terms.push_back({"algorithm", algorithm_term(settings)});
  terms.push_back(secure_aggregation_term(settings));
  terms.push_back({"privacy", privacy_term(o), {}, "give every site the same --dp-* settings"});

  // Where optimizer state travels with the parameters, sites with different optimizers would mix
  // buffers of different meanings (or lengths): the optimizer is part of the terms there only.
  const auto wire = settings.algorithm().wire_limits(settings);
  if (!wire.pin_model_elements || wire.max_model_multiple > 1) {
    std::string optimizer = o.optimizer;
    if (settings.optimizer == models::OptimizerKind::momentum ||
        settings.optimizer == models::OptimizerKind::nesterov) {
      optimizer += ' ';
      optimizer += number(o.momentum);
    }
    terms.push_back({"optimizer", optimizer});
  }

  return terms;
}

peer::FederationTerms federation_terms(const SiteSettings& settings, const AttachedModel& model) {
  return {{"trainer", "attached"},
          {"model", model.fingerprint(), model.summary()},
          {"algorithm", algorithm_term(settings)},
          secure_aggregation_term(settings)};
}

}  // namespace meridian::daemon

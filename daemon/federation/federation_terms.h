// The federation terms a site announces when it joins (peer/federation_terms.h): everything that must
// be equal on every site, as canonical text.
//   categories a table's category columns with their lists (models/data/tabular_schema.h), when it has any
//   columns    the names of the features, in order, where the data names them (a CSV header: numeric
//              columns sorted by name, missing indicators, one-hot categories)
//   data       the input shape, the class count and the class names where the data has them
//   normalization  how inputs are scaled (models/data/normalization_spec.h), with the values when given
//   model      the model's fingerprint: architecture, input shape, class count, parameter count;
//              shown in refusals as its summary ("mlp 784-256-128-10 (235,146 parameters)")
//   algorithm  the algorithm and its shape, as its start-up log line says it (daemon/algorithms/:
//              D, P, tau, K, grid, exchange, compression), plus robust aggregation and its clip and trim
//   secure-aggregation  on or off (--secure-aggregation: every site masks its shares, or none does)
//   privacy    DP-SGD's settings (--dp-epsilon, --dp-noise-multiplier, --dp-delta, --dp-clip), or none
//   optimizer  only where the algorithm puts optimizer state on the wire (its wire_limits: allreduce's
//              re-average, dts with momentum), with its momentum
// Thread-safety: a pure function.
#pragma once

#include "daemon/attached/attached_model.h"
#include "daemon/site_config.h"
#include "models/data/dataset.h"
#include "models/model.h"
#include "peer/federation_terms.h"

namespace meridian::daemon {

peer::FederationTerms federation_terms(const SiteSettings& settings, const models::Model& model,
                                       const models::data::Dataset& train);

// The terms of a site whose trainer is attached (daemon/attached/attached_trainer.h): "trainer" (attached),
// "model" (the declared tensors' names, shapes and dtypes in order: AttachedModel::fingerprint(), shown
// as its summary) and "algorithm" as above. The data stays with the trainer and the optimizer is the
// trainer's own, so neither is announced; a built-in site and an attached one never agree.
peer::FederationTerms federation_terms(const SiteSettings& settings, const AttachedModel& model);

}  // namespace meridian::daemon

// How a model uses T compute threads on the CPU backend. Models with convolutions split each batch
// across T copies of the layer chain (Model::set_threads), because their im2col, pooling and
// element-wise work is a large share of a step and parallelizes with the batch; GEMM-only models
// (MLP, logistic regression) let OpenBLAS thread each GEMM instead, which measured faster here for
// batch 64 (bench/train_throughput.cc, docs/benchmarks.md). Either way the result of a step is the
// same up to float summation order, except that batch norm normalizes each part of a split batch with
// the part's statistics (model.h). A backend that is not host-addressable (the GPU) runs one layer
// chain; the thread count is only recorded on it.
#pragma once

#include <cstddef>

#include "models/backend.h"
#include "models/model.h"

namespace meridian::models {

// threads >= 1. Call once, before training, from the thread that owns model and backend.
void use_threads(Model& model, Backend& backend, std::size_t threads);

}  // namespace meridian::models

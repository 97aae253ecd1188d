// For CUDA tests: ends the current test case as skipped, with the reason, when this machine has no usable
// CUDA device. The runner (scripts/run-tests) counts "SKIPPED:" warnings as skipped tests.
#pragma once

#include <catch2/catch.hpp>

#include "models/device.h"

#define MERIDIAN_SKIP_WITHOUT_CUDA_DEVICE()                                              \
  do {                                                                                   \
    const ::meridian::models::CudaAvailability cuda_ = ::meridian::models::probe_cuda(); \
    if (cuda_.device_count == 0) {                                                       \
      WARN("SKIPPED: no CUDA device: " << cuda_.reason);                                 \
      return;                                                                            \
    }                                                                                    \
  } while (false)

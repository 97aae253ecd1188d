// MERIDIAN_HOST_DEVICE marks inline math that is compiled for both the CPU and, under nvcc, CUDA
// kernels. Headers that use it must stay free of the standard library beyond <cmath> and
// <cstdint> so that nvcc can compile them; the CPU backend calls the same functions, which is how the
// CPU tests cover the math the GPU kernels run.
#pragma once

#if defined(__CUDACC__)
#define MERIDIAN_HOST_DEVICE __host__ __device__
#else
#define MERIDIAN_HOST_DEVICE
#endif

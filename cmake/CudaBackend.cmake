# Decides whether the CUDA backend (cuda/) is built, from MERIDIAN_CUDA:
#   auto  build it when nvcc, cuBLAS and cuDNN are found, otherwise say so in one line and go on;
#   0     never build it;
#   1     build it, and fail the configuration with the reason when something is missing.
# Sets MERIDIAN_CUDA_ENABLED and, when ON, enables the CUDA language and finds CUDAToolkit (targets
# CUDA::cudart, CUDA::cublas) and cuDNN (MERIDIAN_CUDNN_LIBRARY, MERIDIAN_CUDNN_INCLUDE_DIR).
# The messages use NOTICE (stderr) because the Makefile hides CMake's ordinary output.

set(MERIDIAN_CUDA_ENABLED OFF)
string(TOLOWER "${MERIDIAN_CUDA}" _meridian_cuda_mode)
if(_meridian_cuda_mode MATCHES "^(0|off|no|false)$")
  set(_meridian_cuda_mode 0)
elseif(_meridian_cuda_mode MATCHES "^(1|on|yes|true)$")
  set(_meridian_cuda_mode 1)
elseif(NOT _meridian_cuda_mode STREQUAL "auto")
  message(FATAL_ERROR "MERIDIAN_CUDA='${MERIDIAN_CUDA}' is not one of auto, 0, 1 (make CUDA=auto|0|1)")
endif()

# Reports why the backend is not built: fatal when it was required, one line otherwise.
macro(_meridian_cuda_unavailable reason)
  if(_meridian_cuda_mode STREQUAL "1")
    message(FATAL_ERROR "CUDA=1 but the CUDA backend cannot be built: ${reason}")
  endif()
  message(NOTICE "-- CUDA backend skipped: ${reason} (the CPU backend is built; CUDA=0 silences this check)")
endmacro()

if(_meridian_cuda_mode STREQUAL "0")
  message(NOTICE "-- CUDA backend off (CUDA=0)")
else()
  # nvcc is rarely on PATH: look where the toolkit installs itself too. An explicit CMAKE_CUDA_COMPILER
  # or CUDACXX wins.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(MERIDIAN_NVCC nvcc
      HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin
      PATHS /usr/local/cuda/bin /usr/local/cuda /opt/cuda/bin)
    if(MERIDIAN_NVCC)
      set(CMAKE_CUDA_COMPILER "${MERIDIAN_NVCC}" CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    _meridian_cuda_unavailable("nvcc not found (looked on PATH, $CUDA_PATH, $CUDA_HOME and /usr/local/cuda/bin)")
  else()
    # Real code for the common data-centre and workstation GPUs (Turing T4, Ampere A100, Ampere RTX 30,
    # Hopper H100) and PTX for compute_90 that the driver JIT-compiles for newer ones (Ada runs the sm_86
    # code, Blackwell the PTX). Five device passes per .cu file keep the build short on two cores; pass
    # -DCMAKE_CUDA_ARCHITECTURES=native (or a list) to build only for the GPU at hand.
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;90-real;90-virtual")
    endif()
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "host compiler for nvcc")
    enable_language(CUDA)
    # .cu files are C++20 like the rest. CMake 3.25 predates nvcc's C++20 support and would refuse the
    # dialect at generation time (CUDA inherits CXX_STANDARD), so teach it the flag nvcc 12+ accepts.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit)
    find_library(MERIDIAN_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_PATH
                 PATH_SUFFIXES lib64 lib)
    find_path(MERIDIAN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_PATH
              PATH_SUFFIXES include)
    if(NOT CUDAToolkit_FOUND)
      _meridian_cuda_unavailable("nvcc found at ${CMAKE_CUDA_COMPILER} but not the CUDA toolkit libraries")
    elseif(NOT TARGET CUDA::cublas)
      _meridian_cuda_unavailable("cuBLAS not found in ${CUDAToolkit_LIBRARY_DIR}")
    elseif(NOT MERIDIAN_CUDNN_LIBRARY OR NOT MERIDIAN_CUDNN_INCLUDE_DIR)
      _meridian_cuda_unavailable("cuDNN (libcudnn, cudnn.h) not found next to CUDA ${CUDAToolkit_VERSION}; set CUDNN_PATH")
    else()
      set(MERIDIAN_CUDA_ENABLED ON)
      message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                     "cuDNN ${MERIDIAN_CUDNN_LIBRARY}")
    endif()
  endif()
endif()

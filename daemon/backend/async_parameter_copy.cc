#include "daemon/backend/async_parameter_copy.h"

#if MERIDIAN_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/parameter_snapshot.h"
#endif

namespace meridian::daemon {

#if MERIDIAN_HAVE_CUDA
namespace {

// cuda::ParameterSnapshot ordered against the backend's one stream, on which the forward and backward
// pass, the optimizer and the compensation are all enqueued.
class CudaParameterCopy final : public AsyncParameterCopy {
 public:
  CudaParameterCopy(const cuda::CudaBackend& backend, std::size_t count) : backend_(backend), snapshot_(count) {}

  void start(const float* params, std::size_t count) override { snapshot_.start(params, count, backend_.stream()); }
  void guard_writes() override { snapshot_.guard_writes(backend_.stream()); }
  std::span<const float> wait() override { return snapshot_.wait(); }

 private:
  const cuda::CudaBackend& backend_;
  cuda::ParameterSnapshot snapshot_;
};

}  // namespace
#endif

std::unique_ptr<AsyncParameterCopy> make_async_parameter_copy(models::Backend& backend, std::size_t count) {
#if MERIDIAN_HAVE_CUDA
  // The snapshot's copy stream is made on the calling thread's current device, which the backend selected.
  if (auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(&backend)) {
    cuda_backend->use_on_this_thread();
    return std::make_unique<CudaParameterCopy>(*cuda_backend, count);
  }
#endif
  (void)backend;
  (void)count;
  return nullptr;
}

}  // namespace meridian::daemon

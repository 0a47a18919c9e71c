// CUDA autocast across the libtorch 1.13 and 2.x C++ APIs: its current state, and a RAII scope.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace titan {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TITAN_DEVICE_GENERIC_AUTOCAST 1
#endif

inline bool cuda_autocast_enabled() {
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
  return at::autocast::is_autocast_enabled(at::kCUDA);
#else
  return at::autocast::is_enabled();
#endif
}

inline at::ScalarType cuda_autocast_dtype() {
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
  return at::autocast::get_autocast_dtype(at::kCUDA);
#else
  return at::autocast::get_autocast_gpu_dtype();
#endif
}

// Enables CUDA autocast to `dtype` for its lifetime when `enable` is true; restores the previous
// state on exit. A no-op when `enable` is false.
class CudaAutocastScope {
 public:
  CudaAutocastScope(bool enable, at::ScalarType dtype) : active_(enable) {
    if (!active_) return;
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
    was_enabled_ = cuda_autocast_enabled();
    previous_dtype_ = cuda_autocast_dtype();
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
#else
    was_enabled_ = cuda_autocast_enabled();
    previous_dtype_ = cuda_autocast_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
#endif
    at::autocast::increment_nesting();
  }

  ~CudaAutocastScope() {
    if (!active_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
    at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
#else
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
#endif
  }

  CudaAutocastScope(const CudaAutocastScope&) = delete;
  CudaAutocastScope& operator=(const CudaAutocastScope&) = delete;

 private:
  bool active_;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace titan

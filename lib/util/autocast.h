// Autocast (CPU and CUDA) across the libtorch 1.13 and 2.x C++ APIs: its current state, and a
// RAII scope.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <torch/version.h>

namespace titan {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TITAN_DEVICE_GENERIC_AUTOCAST 1
#endif

// Whether autocast is on for `device` (kCPU or kCUDA) on this thread.
inline bool autocast_enabled(c10::DeviceType device) {
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                             : at::autocast::get_autocast_gpu_dtype();
#endif
}

inline void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#ifdef TITAN_DEVICE_GENERIC_AUTOCAST
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

// Enables autocast to `dtype` on `device` (kCPU or kCUDA) for its lifetime when `enable` is
// true; restores the previous state on exit. A no-op when `enable` is false.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, bool enable, at::ScalarType dtype)
      : device_(device), active_(enable) {
    if (!active_) return;
    was_enabled_ = autocast_enabled(device_);
    previous_dtype_ = autocast_dtype(device_);
    set_autocast(device_, true, dtype);
    at::autocast::increment_nesting();
  }

  ~AutocastScope() {
    if (!active_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast(device_, was_enabled_, previous_dtype_);
  }

  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace titan

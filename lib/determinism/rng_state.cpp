#include "determinism/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <torch/cuda.h>

#include <mutex>

namespace titan {
namespace {

at::Generator default_generator(const c10::Device& device) {
  if (device.is_cpu()) return at::detail::getDefaultCPUGenerator();
  return at::globalContext().defaultGenerator(device);
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || (a.sizes() == b.sizes() && a.dtype() == b.dtype() && a.equal(b));
}

int64_t cuda_device_count() {
  return torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
}

}  // namespace

at::Tensor generator_state(const c10::Device& device) {
  at::Generator gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const c10::Device& device, const at::Tensor& state) {
  at::Generator gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

bool RngState::operator==(const RngState& other) const {
  if (!same_bytes(cpu, other.cpu) || cuda.size() != other.cuda.size()) return false;
  for (size_t i = 0; i < cuda.size(); ++i) {
    if (!same_bytes(cuda[i], other.cuda[i])) return false;
  }
  return true;
}

RngState capture_rng_state() {
  RngState s;
  s.cpu = generator_state(c10::Device(c10::kCPU));
  for (int64_t i = 0; i < cuda_device_count(); ++i) {
    s.cuda.push_back(generator_state(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i))));
  }
  return s;
}

void restore_rng_state(const RngState& s) {
  set_generator_state(c10::Device(c10::kCPU), s.cpu);
  for (size_t i = 0; i < s.cuda.size(); ++i) {
    set_generator_state(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)), s.cuda[i]);
  }
}

}  // namespace titan

// Saving and restoring the global random generators' states (CPU, and each CUDA device's), for
// activation checkpointing's RNG replay and for the TrainState a run continues from.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <vector>

namespace titan {

// The state of `device`'s default generator (a uint8 tensor on the CPU), under its lock.
at::Tensor generator_state(const c10::Device& device);

// Sets `device`'s default generator to `state`, as returned by generator_state.
void set_generator_state(const c10::Device& device, const at::Tensor& state);

// The CPU generator and every visible CUDA device's.
struct RngState {
  at::Tensor cpu;
  std::vector<at::Tensor> cuda;  // index = CUDA device index; empty without CUDA

  // Byte-wise equality of every state.
  bool operator==(const RngState& other) const;
};

RngState capture_rng_state();

// Requires: `state` was captured in a process with the same CUDA devices.
void restore_rng_state(const RngState& state);

}  // namespace titan

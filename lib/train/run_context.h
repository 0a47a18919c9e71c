// RunContext: the process-wide set-up of one run, built in the one order that state depends on:
//
//   1. world          rank and world size from the launcher's environment (torchrun, Slurm)
//   2. device         cpu, or this rank's cuda device (chosen, not yet used)
//   3. process group  the collectives between ranks, Gloo or NCCL (rendezvous; rank 0 draws the
//                     seed when unset)
//   4. determinism    seeds, threads, deterministic algorithms, warning handler
//   5. cuda           the device made current, after the determinism settings CUDA must see
//                     first; no two ranks on one GPU
//
// Data parallelism needs the process group before seeding (to agree on the seed); changing the
// order means changing build_run_context only. Nothing writes a context after it is built: Run
// (train/run.h) owns it, and the parts, outputs and trainer take it by const reference.
#pragma once

#include <c10/core/Device.h>

#include <iosfwd>
#include <memory>

#include "config/config.h"
#include "determinism/determinism.h"
#include "distributed/process_group.h"
#include "distributed/world.h"

namespace titan {

struct RunContext {
  Config config;                // resolved; debug.seed holds the seed actually used
  std::ostream* log = nullptr;  // this rank's console (a silent one for ranks LOG_RANK leaves out)
  std::ostream* errors = nullptr;  // warnings that must not go to the console (which failed)
  bool console_is_terminal =
      false;  // colours for the console lines (metrics.disable_color_printing)
  WorldInfo world;
  std::unique_ptr<ProcessGroup> process_group;
  DeterminismRecord determinism;
  c10::Device device = c10::Device(c10::kCPU);
  double peak_flops = 0;  // for MFU: measured sgemm on CPU, the device table on CUDA; 0 unknown
};

struct RunContextOptions {
  bool measure_peak_flops = true;  // tests skip the start-up sgemm measurement
  std::ostream* errors = nullptr;  // RunContext::errors; null: the console
  bool console_is_terminal = false;
};

// Steps 1-5, the console being `log`. Throws ConfigError (exit 2) for a bad environment, device
// or determinism setting. Writes no file.
RunContext build_run_context(const Config& config, std::ostream& log,
                             const RunContextOptions& options = {});

// Steps 1 and 2 and the checks that need neither the rendezvous nor a model: the world, the
// data-parallel split, the device, the debugging features' limits for this world, the backend.
// Throws ConfigError as build_run_context does. With `machine` kIntended the device is the one
// training.device asks for, not checked against this machine (--print-config on a login node).
enum class MachineCheck { kThisMachine, kIntended };
struct RunPlan {
  WorldInfo world;
  c10::Device device = c10::Device(c10::kCPU);
  GroupBackend backend = GroupBackend::kSingle;
};
RunPlan plan_run(const Config& config, MachineCheck machine = MachineCheck::kThisMachine);

// The refusals a run of `config` with the launcher's environment makes before its rendezvous that
// do not depend on the machine that trains (its device and memory are checked when the run
// starts there): plan_run(kIntended) and the tokenizer. --print-config runs them, so that a
// config it prints is one the job accepts. Writes no file, builds no process group.
// (run_components.cpp)
void check_config_for_run(const Config& config);

// "auto" -> cuda when available, else cpu; a CUDA device is the process's own among those it
// sees (distributed/process_group.h, cuda_device_for). Throws ConfigError for "cuda" without
// CUDA, or more local ranks than devices.
c10::Device resolve_device(DeviceChoice choice, const WorldInfo& world);

}  // namespace titan

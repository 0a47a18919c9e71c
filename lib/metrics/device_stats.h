// Device facts for metrics: peak memory, capacity, FLOPs per token and peak FLOP/s.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "model/model_args.h"

namespace titan {

struct MemoryReading {
  double peak_gib = 0;  // CPU: peak RSS of the process; CUDA: max reserved since the last reset
  double pct = 0;       // of device_memory_bytes()
};

// Reads the peak and, on CUDA, resets it so each log interval reports its own peak.
MemoryReading read_and_reset_peak_memory(const c10::Device& device);

// Resident set size of this process now, in bytes (/proc/self/statm).
double current_rss_bytes();
// The most this process has held resident so far, in bytes (its high-water mark, ru_maxrss).
double peak_rss_bytes();

// CPU time and minor page faults of this process so far (getrusage), all threads.
struct CpuUsage {
  double user_s = 0, system_s = 0;
  double minor_faults = 0;
};
CpuUsage cpu_usage();

// Memory the process may use on the device, in bytes: the GPU's memory, or for the CPU the
// smaller of host RAM and the process's cgroup limit.
double device_memory_bytes(const c10::Device& device);

// What device_memory_bytes measured, for messages: the GPU's name, "host RAM" or
// "cgroup limit <file>".
std::string device_memory_source(const c10::Device& device);

// torchtitan's count: 6 x (active params - embedding params) + 6 x layers x heads x (q/k + v
// head widths) x seq_len, where an MoE layer's routed experts count top_k / num_experts of theirs.
double flops_per_token(const ModelArgs& args, int64_t seq_len);

// Peak FLOP/s: on CUDA from a table of bf16 dense peaks by device name (A100 when unknown);
// on CPU the environment's TITAN_CPU_PEAK_FLOPS when set (cpu_peak_flops_override), else measured
// with a short float32 matmul, on the library the linear layers use (debug.cpu_linear).
double peak_flops(const c10::Device& device);

// TITAN_CPU_PEAK_FLOPS (a positive number of FLOP/s, "2.5e11"), or 0 when unset. Throws
// ConfigError naming the variable for any other value.
double cpu_peak_flops_override();

// The device's name for logs: "cpu (N cores)" or the GPU name.
std::string device_name(const c10::Device& device);

// The processor model (from /proc/cpuinfo) on CPU, the GPU name on CUDA: what determines which
// kernels run, for fingerprint.log.
std::string hardware_name(const c10::Device& device);

}  // namespace titan

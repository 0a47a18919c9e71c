// How much memory this process may use: the host's RAM, or less when a cgroup (v2 memory.max,
// v1 memory.limit_in_bytes) on the process's path, or any ancestor of it, sets a lower limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace titan {

struct MemoryLimit {
  double bytes = 0;
  std::string source;  // "host RAM" or "cgroup limit <file>", for messages
};

// The smallest memory limit set by the cgroups named in `proc_self_cgroup` (the text of
// /proc/self/cgroup) under the cgroup filesystem mounted at `cgroup_root`, or nullopt when none
// is set ("max", v1's near-2^63 "unlimited", or no readable file).
std::optional<MemoryLimit> cgroup_memory_limit(const std::string& proc_self_cgroup,
                                               const std::string& cgroup_root);

// The smaller of host RAM and this process's cgroup limit.
MemoryLimit process_memory_limit();

// Under a finite address-space limit (ulimit -v), makes sure `threads` more threads can start:
// each needs its stack and OpenBLAS a buffer of its own, and a thread that cannot start hangs
// the thread pools that wait for it (pthreadpool) or spins retrying (OpenBLAS). Reserves the
// bytes for a moment (mmap without access) and gives them back. Throws OutOfMemory naming the
// limit when they cannot be had. No-op without a limit.
void check_thread_headroom(int64_t threads);

// The smallest stack limit (ulimit -s) titan-train starts under. glibc sizes every thread's
// stack by it, and libtorch's and OpenBLAS's threads overflow theirs below about 192 KiB (a
// segmentation fault in the first step); 1 MiB leaves a margin over what was measured.
constexpr uint64_t kMinStackBytes = uint64_t(1) << 20;

// Throws ConfigError naming ulimit -s when the soft stack limit is below kMinStackBytes.
void check_stack_limit();

}  // namespace titan

// How idle worker threads wait: OpenMP's (ATen's intra-op pool) and OpenBLAS's.
//
// titan-train has two thread pools on the same cores: ATen's OpenMP workers (element-wise ops, the
// attention's heads) and OpenBLAS's pthreads (large matmuls). An idle worker of either pool that
// spins keeps a core from the other pool's next task. Measured on 2 cores (debug model):
// - OpenMP workers spinning more than halved throughput (1,117 vs 3,254 tokens/s);
// - OpenBLAS's workers spin with sched_yield for up to 2^28 cycles after every call (its default
//   OPENBLAS_THREAD_TIMEOUT of 28), which cost 15-25% of the step and most of its kernel time
//   once the attention ran on ATen's pool (scripts/bench.sh; see the README's CPU notes).
// Both libraries read their variable only when they load, before main, so the only way to set it
// from inside the program is to re-execute it with the variables set.
#pragma once

#include <string>

namespace titan {

// Sets OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 (the shortest spin OpenBLAS allows)
// where unset, and if it set either, re-executes /proc/self/exe with the same arguments; does not
// return in that case. Returns normally when both are already set (by the user or by the first
// execution) or when the re-exec fails. A variable the user set is never changed.
void ensure_idle_threads_sleep(char** argv);

// Applies TORCH_CPP_LOG_LEVEL (ensure_idle_threads_sleep sets it to FATAL unless the user set it)
// to libtorch's own logging. Call once at start, before any libtorch work.
void apply_library_log_level();

// Checks the thread variables the libraries read (OMP_NUM_THREADS, OMP_WAIT_POLICY,
// OPENBLAS_NUM_THREADS, OPENBLAS_THREAD_TIMEOUT) and throws ConfigError naming the first that
// holds a value they would reject. libgomp prints its own line about such a value when it
// loads, before main, which nothing in the program can suppress; this turns it into an exit 2.
void check_thread_environment();

// One line for the start-up log: each variable's value and whether titan-train set it.
std::string idle_threads_summary();

}  // namespace titan

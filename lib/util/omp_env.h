// OpenMP wait policy for the process.
//
// ATen's OpenMP workers spin after each parallel region while OpenBLAS's own threads want the
// same cores for the next matmul; on a 2-core machine the spinning more than halves training
// throughput (measured: 1,117 vs 3,254 tokens/s on the debug model). libgomp reads
// OMP_WAIT_POLICY only when it loads, before main, so the only way to change it from inside the
// program is to re-execute it with the variable set.
#pragma once

namespace titan {

// If OMP_WAIT_POLICY is unset, sets it to PASSIVE and re-executes /proc/self/exe with the same
// arguments; does not return in that case. Returns normally when the variable is already set
// (by the user or by the first execution) or when the re-exec fails.
void ensure_passive_omp_wait(char** argv);

}  // namespace titan

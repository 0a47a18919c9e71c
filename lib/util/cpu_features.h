// What the CPU can run, checked once at run time: the hand-vectorized kernels
// (lib/model/*_avx2.cpp, lib/optim/*_avx2.cpp) are built for AVX2 and FMA, and nothing in them may
// run before cpu_has_avx2_fma() says true.
#pragma once

namespace titan {

// True when this CPU is x86-64 with AVX2 and FMA; false on any other architecture.
bool cpu_has_avx2_fma();

// Whether titan's fused kernels may be chosen: the CPU has AVX2 and FMA, and the run has not asked
// for ATen's ops everywhere (debug.cpu_kernels = "aten", set_fused_kernels_allowed(false)).
// Kernels are chosen when a model or optimizer is built and when an op runs, so the setting is
// made once per run, before either.
bool fused_kernels_enabled();
void set_fused_kernels_allowed(bool allowed);

}  // namespace titan

// What the CPU can run, checked once at run time: the hand-vectorized kernels
// (lib/model/*_avx2.cpp, lib/optim/*_avx2.cpp) are built for AVX2 and FMA, and nothing in them may
// run before cpu_has_avx2_fma() says true.
#pragma once

namespace titan {

// True when this CPU is x86-64 with AVX2 and FMA; false on any other architecture.
bool cpu_has_avx2_fma();

}  // namespace titan

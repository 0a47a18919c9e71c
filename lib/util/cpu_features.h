// What the CPU can run, checked once at run time, and which of titan's fused CPU kernels a run
// uses. The kernels are built twice (util/simd_vectors.h): for AVX2 and FMA (lib/model/*_avx2.cpp,
// lib/optim/*_avx2.cpp) and for AVX-512 (*_avx512.cpp). Nothing in those files may run before the
// checks here say the CPU has what they were built for; fused_kernel_isa() says which to call.
#pragma once

namespace titan {

// True when this CPU is x86-64 with AVX2 and FMA; false on any other architecture.
bool cpu_has_avx2_fma();
// True when it also has AVX-512F (and the OS saves its registers); false elsewhere.
bool cpu_has_avx512();

// The vector width titan's fused kernels run at. Both give the same bits (simd_vectors.h); the
// start-up line and fingerprint.log's header name the one that ran.
enum class VectorIsa { kAvx2, kAvx512 };

// What debug.cpu_kernels asks for: the fused kernels at the widest vectors the CPU has, the
// fused kernels held to AVX2 (to test or time the AVX2 path on an AVX-512 machine), or ATen's
// ops everywhere.
enum class FusedKernels { kWidest, kAvx2Only, kOff };

// Whether titan's fused kernels may be chosen: the CPU has AVX2 and FMA, and the run has not asked
// for ATen's ops (FusedKernels::kOff). Kernels are chosen when a model or optimizer is built and
// when an op runs, so the setting is made once per run, before either.
bool fused_kernels_enabled();
// Requires fused_kernels_enabled(). AVX-512 where the CPU has it and the run allows it.
VectorIsa fused_kernel_isa();
void set_fused_kernels(FusedKernels choice);

}  // namespace titan

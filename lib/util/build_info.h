// Facts about how this binary was built.
#pragma once

namespace titan {

// Whether CMake found a CUDA libtorch (TITAN_WITH_CUDA): the CUDA paths (device statistics,
// the NCCL process group) are compiled in. Whether a GPU is there is torch::cuda::is_available().
#ifdef TITAN_WITH_CUDA
inline constexpr bool kCudaCompiledIn = true;
#else
inline constexpr bool kCudaCompiledIn = false;
#endif

}  // namespace titan

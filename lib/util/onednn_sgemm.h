// oneDNN's sgemm for the linear layers' matmuls (debug.cpu_linear = "onednn"), found at run time:
// in the libraries already loaded (Debian's libtorch, 1.13 and 2.x, links oneDNN) or else in
// libdnnl.so.3 / libdnnl.so.2. titan-train builds without oneDNN's headers, and a libtorch without
// it runs unless a run asks for it. Its kernels decide bits: they differ from OpenBLAS's, and
// across oneDNN versions and the instruction sets it picks for the CPU.
#pragma once

#include <cstdint>
#include <string>

namespace titan {

struct OnednnLibrary {
  bool loaded = false;
  std::string version;  // "2.6.3" when loaded
  std::string error;    // why not, when not loaded (for a ConfigError's hint)
};

// Finds oneDNN once; later calls return the same answer. Thread-safe.
const OnednnLibrary& onednn_library();

// Requires onednn_library().loaded, M, N, K > 0. Row-major C (M, N) = op(A) op(B), op(X) = X or
// X^T, with leading dimensions lda, ldb, ldc (floats between rows as stored). Runs on the
// OpenMP threads ATen's at::set_num_threads sets. Throws std::runtime_error if oneDNN refuses.
void onednn_sgemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc);

// Which library the linear layers' float32 CPU matmuls run on: ATen's (the BLAS libtorch loaded)
// or oneDNN's sgemm. Set once per run (debug.cpu_linear), before any model is built.
enum class LinearBackend { kAten, kOnednn };
void set_linear_backend(LinearBackend backend);
LinearBackend linear_backend();

}  // namespace titan

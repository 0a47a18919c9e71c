// OpenBLAS thread-pool control and kernel report, when the BLAS libtorch loaded is OpenBLAS.
#pragma once

#include <string>

namespace titan {

// Sets OpenBLAS's thread count; false when the loaded BLAS is not OpenBLAS.
bool set_blas_threads(int threads);

// Current OpenBLAS thread count, or 0 when the loaded BLAS is not OpenBLAS.
int blas_threads();

// The OpenBLAS kernel set doing the matmuls, and where it came from. The kernel set decides the
// matmuls' bits: two runs with different sets part numerically from step 1. OpenBLAS reads
// OPENBLAS_CORETYPE once, when it loads; titan-train never changes it.
struct BlasKernels {
  std::string core;    // "Haswell", "Cooperlake", ...; "" when the loaded BLAS is not OpenBLAS
  std::string origin;  // "OPENBLAS_CORETYPE=Haswell in the environment" or "detected for this CPU"

  // The kernels' identity, for fingerprint.log's header: "OpenBLAS Haswell", or "not OpenBLAS".
  std::string name() const;
  // For the start-up log, when core is set: "OpenBLAS Haswell (detected for this CPU)".
  std::string description() const;
};
BlasKernels openblas_kernels();

// While alive, BLAS calls run single-threaded: for code that calls BLAS from inside its own
// at::parallel_for, where a multi-threaded BLAS would oversubscribe the cores.
class SingleThreadedBlasScope {
 public:
  SingleThreadedBlasScope();
  ~SingleThreadedBlasScope();
  SingleThreadedBlasScope(const SingleThreadedBlasScope&) = delete;
  SingleThreadedBlasScope& operator=(const SingleThreadedBlasScope&) = delete;

 private:
  int previous_;
};

}  // namespace titan

// OpenBLAS thread-pool control, when the BLAS libtorch loaded is OpenBLAS.
#pragma once

namespace titan {

// Sets OpenBLAS's thread count; false when the loaded BLAS is not OpenBLAS.
bool set_blas_threads(int threads);

// Current OpenBLAS thread count, or 0 when the loaded BLAS is not OpenBLAS.
int blas_threads();

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

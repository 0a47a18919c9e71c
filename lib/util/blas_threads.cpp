#include "util/blas_threads.h"

#include <dlfcn.h>

#include <cstdlib>

namespace titan {
namespace {

// An OpenBLAS entry point looked up in the libraries already loaded (libtorch links the system
// BLAS), or nullptr when that BLAS is not OpenBLAS.
template <typename Fn>
Fn openblas_function(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

bool set_blas_threads(int threads) {
  static auto set = openblas_function<void (*)(int)>("openblas_set_num_threads");
  if (!set) return false;
  set(threads);
  return true;
}

int blas_threads() {
  static auto get = openblas_function<int (*)()>("openblas_get_num_threads");
  return get ? get() : 0;
}

BlasKernels openblas_kernels() {
  static auto core_name = openblas_function<char* (*)()>("openblas_get_corename");
  const char* core = core_name ? core_name() : nullptr;
  if (core == nullptr) return {};
  const char* requested = std::getenv("OPENBLAS_CORETYPE");
  return {core, requested == nullptr
                    ? std::string("detected for this CPU")
                    : std::string("OPENBLAS_CORETYPE=") + requested + " in the environment"};
}

std::string BlasKernels::name() const { return core.empty() ? "not OpenBLAS" : "OpenBLAS " + core; }

std::string BlasKernels::description() const { return name() + " (" + origin + ")"; }

SingleThreadedBlasScope::SingleThreadedBlasScope() : previous_(blas_threads()) {
  if (previous_ > 1) set_blas_threads(1);
}

SingleThreadedBlasScope::~SingleThreadedBlasScope() {
  if (previous_ > 1) set_blas_threads(previous_);
}

}  // namespace titan

#include "util/blas_threads.h"

#include <dlfcn.h>

#include <cstdlib>

namespace titan {
namespace {

using SetThreads = void (*)(int);
using GetThreads = int (*)();

SetThreads set_fn() {
  static auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  return fn;
}

GetThreads get_fn() {
  static auto fn = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn;
}

}  // namespace

bool set_blas_threads(int threads) {
  if (!set_fn()) return false;
  set_fn()(threads);
  return true;
}

int blas_threads() { return get_fn() ? get_fn()() : 0; }

std::string openblas_kernels() {
  using CoreName = char* (*)();
  static auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* core = core_name ? core_name() : nullptr;
  if (core == nullptr) return "";
  const char* requested = std::getenv("OPENBLAS_CORETYPE");
  if (requested == nullptr) return std::string(core) + " (detected for this CPU)";
  return std::string(core) + " (OPENBLAS_CORETYPE=" + requested + " in the environment)";
}

SingleThreadedBlasScope::SingleThreadedBlasScope() : previous_(blas_threads()) {
  if (previous_ > 1) set_blas_threads(1);
}

SingleThreadedBlasScope::~SingleThreadedBlasScope() {
  if (previous_ > 1) set_blas_threads(previous_);
}

}  // namespace titan

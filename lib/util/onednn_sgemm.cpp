#include "util/onednn_sgemm.h"

#include <dlfcn.h>

#include <atomic>
#include <stdexcept>

namespace titan {
namespace {

// dnnl.h's declarations, the same in oneDNN 2.x and 3.x (dnnl_dim_t is int64_t; 0 is success).
using Sgemm = int (*)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                      float* C, int64_t ldc);
struct DnnlVersion {
  int major, minor, patch;
};
using Version = const DnnlVersion* (*)();

struct Loaded {
  OnednnLibrary library;
  Sgemm sgemm = nullptr;
};

// The library libtorch linked, if any, so that one oneDNN runs in the process; else the first of
// Debian's sonames that loads.
void* find_library(std::string& tried) {
  // The program's global scope: the handle is not RTLD_DEFAULT, which is a null pointer.
  if (dlsym(RTLD_DEFAULT, "dnnl_sgemm") != nullptr) return dlopen(nullptr, RTLD_NOW);
  for (const char* name : {"libdnnl.so.3", "libdnnl.so.2"}) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    tried += tried.empty() ? name : std::string(", ") + name;
  }
  return nullptr;
}

Loaded load() {
  Loaded out;
  std::string tried;
  void* handle = find_library(tried);
  if (handle == nullptr) {
    out.library.error = "oneDNN was not found (tried " + tried +
                        "); install it (Debian bookworm: apt-get install libdnnl2)";
    return out;
  }
  out.sgemm = reinterpret_cast<Sgemm>(dlsym(handle, "dnnl_sgemm"));
  auto version = reinterpret_cast<Version>(dlsym(handle, "dnnl_version"));
  if (out.sgemm == nullptr || version == nullptr) {
    out.library.error = "the oneDNN library found has no dnnl_sgemm or dnnl_version";
    return out;
  }
  const DnnlVersion* v = version();
  out.library.version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  out.library.loaded = true;
  return out;
}

const Loaded& loaded() {
  static const Loaded once = load();
  return once;
}

std::atomic<LinearBackend> backend{LinearBackend::kAten};

}  // namespace

const OnednnLibrary& onednn_library() { return loaded().library; }

void onednn_sgemm(bool transpose_a, bool transpose_b, int64_t M, int64_t N, int64_t K,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  const Loaded& l = loaded();
  if (l.sgemm == nullptr) throw std::runtime_error("onednn_sgemm: " + l.library.error);
  const int status = l.sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', M, N, K, 1.0f, A,
                             lda, B, ldb, 0.0f, C, ldc);
  if (status != 0)
    throw std::runtime_error("onednn_sgemm: dnnl_sgemm failed with status " +
                             std::to_string(status));
}

void set_linear_backend(LinearBackend choice) { backend.store(choice); }
LinearBackend linear_backend() { return backend.load(); }

}  // namespace titan

#include "util/malloc_tuning.h"

#include <cstdlib>
#include <cstring>

#include "util/env_switch.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace titan {
namespace {

std::string& summary() {
  static std::string text;
  return text;
}

constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
constexpr int kTrimThreshold = 1 << 30;   // give the heap top back only above 1 GiB
constexpr int kTopPad = 64 << 20;         // grow the heap 64 MiB at a time

}  // namespace

void tune_malloc_for_training() {
  if (env_switch(EnvSwitch::kMallocTuning) == "0") {
    summary() = "glibc malloc defaults (TITAN_MALLOC_TUNING=0)";
    return;
  }
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name)) {
      summary() = std::string("glibc malloc as set by ") + name + " and the environment";
      return;
    }
  }
#if defined(__GLIBC__)
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                  mallopt(M_TOP_PAD, kTopPad) == 1;
  summary() = ok ? "glibc malloc tuned for training: mmap threshold 32 MiB, trim threshold 1 GiB, "
                   "top pad 64 MiB (TITAN_MALLOC_TUNING=0 keeps the defaults)"
                 : "glibc malloc defaults (mallopt refused the tuning)";
#else
  summary() = "the C library's malloc defaults (tuning is glibc-only)";
#endif
}

bool return_free_heap_to_kernel() {
#if defined(__GLIBC__)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

const std::string& malloc_tuning_summary() { return summary(); }

}  // namespace titan

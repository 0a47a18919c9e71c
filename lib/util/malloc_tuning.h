// glibc malloc settings for a training loop.
//
// Each step allocates and frees the same large tensors. With glibc's defaults, blocks above the
// (dynamic) mmap threshold are mmap'ed and munmap'ed every time, and a freed heap top above
// 128 KiB is given back to the kernel, so the next step faults the same pages in again: on the
// CPU debug model about 100,000 minor page faults per step and a quarter of the CPU time in the
// kernel. Raising the mmap threshold to its maximum (32 MiB) and keeping the heap top removes
// most of that churn (measured in scripts/bench.sh; see README "CPU performance notes").
#pragma once

#include <string>

namespace titan {

// Applies the settings unless TITAN_MALLOC_TUNING=0, or glibc's own MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_ or MALLOC_TOP_PAD_ is set (the user's choice wins). Call once, early in
// main, before the large allocations. A no-op on other C libraries.
void tune_malloc_for_training();

// Gives the heap's free pages back to the kernel (glibc's malloc_trim), once memory that will
// not be needed again was freed (FSDP's whole model after sharding): the tuning above keeps
// freed memory for reuse, and pieces of it between live blocks would otherwise stay resident.
// Returns whether anything was given back; false on other C libraries.
bool return_free_heap_to_kernel();

// What tune_malloc_for_training did, one line for the start-up log ("" before it ran).
const std::string& malloc_tuning_summary();

}  // namespace titan

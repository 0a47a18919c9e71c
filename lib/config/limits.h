// Upper bounds of the numeric config keys, chosen so that no product the trainer forms can
// overflow int64 and no single value asks for an absurd allocation before the memory check
// (train/memory_check.h) gets to weigh the whole run.
//
// The arithmetic they guarantee (every factor already validated):
//   tokens per micro-batch   local_batch_size x seq_len          <= 2^20 x 2^20 = 2^40
//   tokens per step          global_batch_size x seq_len         <= kMaxTokensPerStep = 2^34
//                            (checked across keys, -1 resolved to local_batch_size)
//   tokens over the run      steps x tokens per step             <= 10^8 x 2^34 < 2^61
// Each cap is far above any real run: Llama 3.1 trains at 128K context (seq_len cap 1M); the
// largest published batches are ~16M tokens per step (2^24; the cap is 1000x that); Llama 3
// 405B's pretraining took about 1M optimizer steps (the steps cap is 100x that).
#pragma once

#include <cstdint>

namespace titan::limits {

constexpr int64_t kMaxSeqLen = int64_t{1} << 20;           // 1,048,576 tokens
constexpr int64_t kMaxLocalBatchSize = int64_t{1} << 20;   // 1,048,576 sequences
constexpr int64_t kMaxGlobalBatchSize = int64_t{1} << 30;  // 1,073,741,824 sequences
constexpr int64_t kMaxTokensPerStep = int64_t{1} << 34;    // 17,179,869,184 tokens
constexpr int64_t kMaxSteps = 100'000'000;                 // also bounds every key counted in steps
// CPU threads: a fixed cap (OpenMP and OpenBLAS take an int; no machine has more hardware
// threads), and at run time at most kThreadsPerCore x the cores the process may use, but never
// less than kMinThreadCap so a run can repeat a bigger machine's thread count (fingerprint.log
// bits depend on it) on a small one.
constexpr int64_t kMaxCpuThreads = 1024;
constexpr int64_t kThreadsPerCore = 8;
constexpr int64_t kMinThreadCap = 64;
// activation_checkpoint.selective_ac_option: checkpoint every Nth block; N above the layer count
// checkpoints nothing, so a bound far above any model's depth loses nothing.
constexpr int64_t kMaxSelectiveAcEvery = 1'000'000;
// Processes of one run (and each parallelism degree): far above any cluster, and small enough
// that degree products stay exact in int64.
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

}  // namespace titan::limits

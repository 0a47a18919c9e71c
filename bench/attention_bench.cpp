// Forward and backward time of the CPU attention kernels of libtorch 1.13 builds
// (model/causal_attention.h): the fused kernels at each vector width the CPU has, and the blocked
// ATen one, on the same inputs, alternated round by round: the figures scripts/bench_attention.sh
// reports.
//
//   titan-bench-attention HEADS T D ROUNDS THREADS
// Inputs are (1, HEADS, T, D) views of (1, T, HEADS, D) tensors, as the model passes them. The
// first line is "sgemm_gflops G", the CPU's matmul rate on THREADS threads as titan-train measures
// it for MFU; the second "max_abs_diff OUT DQ DK DV" between the fused and blocked results. Then
// each round prints "KERNEL fwd MS bwd MS" for fused_avx512 (where the CPU has AVX-512),
// fused_avx2_fma and blocked_aten.
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "metrics/device_stats.h"
#include "model/attention_kernels.h"
#include "model/causal_attention.h"
#include "util/blas_threads.h"
#include "util/malloc_tuning.h"

using namespace titan;

namespace {

using Kernel = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&);

at::Tensor blocked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return blocked_causal_attention(q, k, v);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Output and gradients of one kernel, and its forward and backward times.
struct Run {
  std::vector<at::Tensor> results;
  double forward_ms, backward_ms;
};

Run run(Kernel kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
        const at::Tensor& grad) {
  auto start = std::chrono::steady_clock::now();
  auto out = kernel(q, k, v);
  const double forward_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  auto grads = torch::autograd::grad({out}, {q, k, v}, {grad});
  const double backward_ms = ms_since(start);
  grads.insert(grads.begin(), out.detach());
  return {grads, forward_ms, backward_ms};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: titan-bench-attention HEADS T D ROUNDS THREADS\n";
    return 2;
  }
  const int64_t heads = std::atoll(argv[1]), T = std::atoll(argv[2]), D = std::atoll(argv[3]);
  const int rounds = std::atoi(argv[4]), threads = std::atoi(argv[5]);
  if (!cpu_has_avx2_fma() || D % 8 != 0) {
    std::cerr << "titan-bench-attention: the fused kernel needs an AVX2+FMA CPU and D % 8 == 0\n";
    return 2;
  }
  tune_malloc_for_training();
  at::set_num_threads(threads);
  torch::manual_seed(0);
  auto make = [&] { return at::randn({1, T, heads, D}).transpose(1, 2).requires_grad_(); };
  auto q = make(), k = make(), v = make();
  auto grad = at::randn({1, heads, T, D});
  set_blas_threads(threads);  // the sgemm rate on as many threads as the kernels get
  std::cout << fmt::format("sgemm_gflops {:.2f}\n", peak_flops(at::kCPU) / 1e9);
  std::vector<std::pair<std::string, VectorIsa>> widths = {{"fused_avx2_fma", VectorIsa::kAvx2}};
  if (cpu_has_avx512()) widths.insert(widths.begin(), {"fused_avx512", VectorIsa::kAvx512});
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    std::vector<std::pair<std::string, Run>> runs;
    for (const auto& [name, isa] : widths) {
      set_fused_kernels(isa == VectorIsa::kAvx2 ? FusedKernels::kAvx2Only : FusedKernels::kWidest);
      runs.emplace_back(name, run(fused_causal_attention, q, k, v, grad));
    }
    runs.emplace_back("blocked_aten", run(blocked, q, k, v, grad));
    if (round == 0) {
      std::string diffs;
      const Run &fused = runs.front().second, &aten = runs.back().second;
      for (size_t i = 0; i < fused.results.size(); ++i)
        diffs +=
            fmt::format(" {:.3g}", (fused.results[i] - aten.results[i]).abs().max().item<float>());
      std::cout << "max_abs_diff" << diffs << "\n";
      continue;
    }
    for (const auto& [name, r] : runs)
      std::cout << fmt::format("{} fwd {:.3f} bwd {:.3f}\n", name, r.forward_ms, r.backward_ms);
  }
}

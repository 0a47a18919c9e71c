// Forward and backward time of the two CPU attention kernels of libtorch 1.13 builds
// (model/causal_attention.h), on the same inputs, alternated round by round: the figures
// scripts/bench_attention.sh reports.
//
//   titan-bench-attention HEADS T D ROUNDS THREADS
// Inputs are (1, HEADS, T, D) views of (1, T, HEADS, D) tensors, as the model passes them. Each
// round prints "fused_avx2_fma fwd MS bwd MS" and "blocked_aten fwd MS bwd MS"; the first line is
// "max_abs_diff OUT DQ DK DV" between the kernels' results.
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "model/attention_kernels.h"
#include "model/causal_attention.h"
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
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    Run fused = run(fused_causal_attention, q, k, v, grad);
    Run aten = run(blocked, q, k, v, grad);
    if (round == 0) {
      std::string diffs;
      for (size_t i = 0; i < fused.results.size(); ++i)
        diffs +=
            fmt::format(" {:.3g}", (fused.results[i] - aten.results[i]).abs().max().item<float>());
      std::cout << "max_abs_diff" << diffs << "\n";
      continue;
    }
    std::cout << fmt::format("fused_avx2_fma fwd {:.3f} bwd {:.3f}\n", fused.forward_ms,
                             fused.backward_ms)
              << fmt::format("blocked_aten fwd {:.3f} bwd {:.3f}\n", aten.forward_ms,
                             aten.backward_ms);
  }
}

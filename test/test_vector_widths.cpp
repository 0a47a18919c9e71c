// titan's fused CPU kernels at AVX-512's width against the same kernels at AVX2's: bit for bit,
// op by op and over whole runs (util/simd_vectors.h's contract). Each width's own bounds against
// float64 and its thread-count invariance are in test_model.cpp and test_optim.cpp.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "model/causal_attention.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "optim/fused_adamw.h"
#include "test_util.h"
#include "util/cpu_features.h"

using namespace titan;

namespace {

void require_avx512() {
  if (!cpu_has_avx512()) TITAN_SKIP("SKIPPED: this CPU has no AVX-512: one width only");
}

// compute() at AVX2's width, then at AVX-512's; each of its tensors equal bit for bit.
void check_widths_agree(const std::function<std::vector<at::Tensor>()>& compute) {
  std::vector<at::Tensor> narrow, wide;
  {
    test::VectorIsaScope width(VectorIsa::kAvx2);
    narrow = compute();
  }
  {
    test::VectorIsaScope width(VectorIsa::kAvx512);
    wide = compute();
  }
  REQUIRE(narrow.size() == wide.size());
  for (size_t i = 0; i < narrow.size(); ++i) {
    INFO("tensor " << i);
    CHECK(at::equal(narrow[i], wide[i]));
  }
}

// Values with the extremes where exp clamps or sigmoid saturates.
at::Tensor with_extremes(at::Tensor x) {
  const float extremes[] = {0.0f, -0.0f, 1e-30f, -100.0f, 100.0f, -90.0f, 89.0f, 20.0f, -20.0f};
  auto flat = x.view(-1);
  for (int64_t i = 0; i < flat.numel() && i < 9; ++i) flat[i] = extremes[i];
  return x;
}

// AdamW's parameters for the width tests, drawn from `seed`: tails of every length (1 to 33
// floats) and 70001 floats (several of the kernels' blocks).
std::vector<at::Tensor> adamw_width_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<at::Tensor> start;
  for (int64_t n = 1; n <= 33; ++n) start.push_back(at::randn({n}));
  start.push_back(at::randn({70001}));
  return start;
}

torch::optim::AdamWOptions adamw_width_options() {
  return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
}

}  // namespace

TEST_CASE(
    "vector widths: fused attention at AVX-512 equals AVX2 bit for bit, output and gradients, "
    "for head dims with and without a half-vector tail",
    "[model][vector_widths]") {
  require_avx512();
  torch::manual_seed(0);
  for (int64_t D : {8, 16, 24, 40, 64}) {
    for (int64_t T : {1, 3, 16, 17, 37, 130}) {
      INFO("T=" << T << " D=" << D);
      // Scores spread over about +-20, so that exp's whole range is used.
      auto q = (3 * at::randn({2, 2, T, D})).requires_grad_();
      auto k = at::randn({2, 2, T, D}).requires_grad_(),
           v = at::randn({2, 2, T, D}).requires_grad_();
      auto grad = at::randn({2, 2, T, D});
      check_widths_agree([&] {
        auto out = fused_causal_attention(q, k, v);
        auto grads = torch::autograd::grad({out}, {q, k, v}, {grad});
        return std::vector<at::Tensor>{out, grads[0], grads[1], grads[2]};
      });
    }
  }
}

TEST_CASE(
    "vector widths: fused SwiGLU at AVX-512 equals AVX2 bit for bit, with tails of every length",
    "[model][vector_widths]") {
  require_avx512();
  torch::manual_seed(1);
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 33; ++n) lengths.push_back(n);
  lengths.push_back(70001);  // spans several parallel tasks
  for (int64_t n : lengths) {
    INFO("n=" << n);
    auto a = with_extremes(4 * at::randn({n})).requires_grad_();
    auto b = at::randn({n}).requires_grad_();
    auto grad = at::randn({n});
    check_widths_agree([&] {
      auto out = fused_swiglu(a, b);
      auto grads = torch::autograd::grad({out}, {a, b}, {grad});
      return std::vector<at::Tensor>{out, grads[0], grads[1]};
    });
  }
}

TEST_CASE(
    "vector widths: fused RMSNorm at AVX-512 equals AVX2 bit for bit, output and both gradients",
    "[model][vector_widths]") {
  require_avx512();
  torch::manual_seed(2);
  for (int64_t C : {8, 24, 40, 256}) {  // 8, 24 and 40 end in half a 16-float vector
    for (int64_t rows : {1, 5, 65, 300}) {
      INFO("rows=" << rows << " C=" << C);
      auto x = (3 * at::randn({rows, C})).requires_grad_();
      auto weight = (1 + 0.1 * at::randn({C})).requires_grad_();
      auto grad = at::randn({rows, C});
      check_widths_agree([&] {
        auto out = fused_rms_norm(x, weight, 1e-5);
        auto grads = torch::autograd::grad({out}, {x, weight}, {grad});
        return std::vector<at::Tensor>{out, grads[0], grads[1]};
      });
    }
  }
}

TEST_CASE(
    "vector widths: the fused AdamW step at AVX-512 equals AVX2 bit for bit, params and both "
    "moments, with tails of every length",
    "[optim][vector_widths]") {
  require_avx512();
  const std::vector<at::Tensor> start = adamw_width_params(3);
  const auto options = adamw_width_options();
  check_widths_agree([&] {
    std::vector<at::Tensor> params;
    for (const auto& p : start) params.push_back(p.clone().requires_grad_());
    FusedAdamW optimizer(params, options);
    for (int step = 0; step < 3; ++step) {
      for (auto& p : params) p.mutable_grad() = at::sin(p.detach() * (step + 1));
      optimizer.step();
    }
    std::vector<at::Tensor> result;
    for (const auto& p : params) {
      const auto& state = static_cast<const torch::optim::AdamWParamState&>(
          *optimizer.state().at(adamw_state_key(p)));
      result.insert(result.end(), {p.detach(), state.exp_avg(), state.exp_avg_sq()});
    }
    return result;
  });
}

TEST_CASE(
    "vector widths: the fused AdamW's measured sums of squares at AVX-512 equal AVX2's bit for "
    "bit, with tails of every length and several blocks",
    "[optim][vector_widths]") {
  require_avx512();
  const std::vector<at::Tensor> start = adamw_width_params(5);
  const auto options = adamw_width_options();
  check_widths_agree([&] {
    std::vector<at::Tensor> params;
    for (const auto& p : start) params.push_back(p.clone().requires_grad_());
    FusedAdamW optimizer(params, options);
    std::vector<double> sums;
    for (int step = 0; step < 2; ++step) {
      for (auto& p : params) p.mutable_grad() = at::sin(p.detach() * (step + 1));
      optimizer.measure_next_step(params);
      optimizer.step();
      for (const auto& p : params) {
        const auto squares = optimizer.measured(p);
        REQUIRE(squares.has_value());
        sums.insert(sums.end(), {squares->weights, squares->change});
      }
    }
    return std::vector<at::Tensor>{at::tensor(sums, at::kDouble)};
  });
}

TEST_CASE(
    "vector widths: debug.cpu_kernels = fused_avx2 names the AVX2 kernels and computes the "
    "default run's fingerprint bit for bit, config hash included",
    "[vector_widths][cli]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  const std::string dir = test::temp_dir("vector_widths");
  const std::string run =
      "--model.flavor tiny --training.seq_len 32 --training.local_batch_size 2 --training.steps 3 "
      "--training.device cpu --debug.seed 4 --debug.fingerprint_freq 1 --job.dump_folder ";
  auto widest = test::run_titan(run + dir + "/widest");
  auto avx2 = test::run_titan(run + dir + "/avx2 --debug.cpu_kernels fused_avx2");
  INFO(widest.output << avx2.output);
  REQUIRE(widest.exit_code == 0);
  REQUIRE(avx2.exit_code == 0);
  const std::string name = cpu_has_avx512() ? "fused_avx512" : "fused_avx2_fma";
  CHECK_THAT(widest.output,
             Catch::Contains("[titan] kernels: attention " + name) &&
                 Catch::Contains("SwiGLU " + name + ", RMSNorm " + name + ", AdamW " + name));
  CHECK_THAT(avx2.output, Catch::Contains("SwiGLU fused_avx2_fma, RMSNorm fused_avx2_fma, AdamW "
                                          "fused_avx2_fma"));
  const std::string a = test::read_text(dir + "/widest/fingerprint.log");
  const std::string b = test::read_text(dir + "/avx2/fingerprint.log");
  CHECK_THAT(a, Catch::Contains("\nadamw_kernel " + name + "\n"));
  CHECK_THAT(b, Catch::Contains("\nadamw_kernel fused_avx2_fma\n"));
  CHECK(test::fingerprint_step_lines(dir + "/widest/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/avx2/fingerprint.log"));
  auto hash_line = [](const std::string& text) {
    const auto at = text.find("\nconfig_hash ");
    return text.substr(at, text.find('\n', at + 1) - at);
  };
  CHECK(hash_line(a) == hash_line(b));
}

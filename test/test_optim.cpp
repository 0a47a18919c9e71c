// LR schedule against hand-computed torchtitan values; AdamW options; the fused AdamW step against
// libtorch's; clipping.
#include <torch/torch.h>

#include <cmath>

#include "catch_torch.h"
#include "optim/fused_adamw.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "test_util.h"
#include "util/cpu_features.h"

using namespace titan;

namespace {
std::vector<double> lrs(const LRSchedulerConfig& c, int64_t steps, double peak) {
  LRSchedule s(c, steps);
  std::vector<double> out;
  for (int64_t step = 1; step <= steps; ++step) out.push_back(peak * s.factor(step));
  return out;
}
}  // namespace

TEST_CASE("optim: debug_model schedule gives torchtitan's learning rates", "[optim]") {
  LRSchedulerConfig c;
  c.warmup_steps = 2;
  c.decay_ratio = 0.8;
  auto got = lrs(c, 10, 8e-4);
  std::vector<double> expected = {4e-4, 8e-4, 8e-4, 7e-4, 6e-4, 5e-4, 4e-4, 3e-4, 2e-4, 1e-4};
  for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-12));
}

TEST_CASE("optim: linear warmup then decay without decay_ratio (torchtitan's unit test)",
          "[optim]") {
  LRSchedulerConfig c;
  c.warmup_steps = 2;
  auto got = lrs(c, 10, 1.0);
  std::vector<double> expected = {0.5,     1,       1,       7.0 / 8, 6.0 / 8,
                                  5.0 / 8, 4.0 / 8, 3.0 / 8, 2.0 / 8, 1.0 / 8};
  for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == Approx(expected[i]));
}

TEST_CASE("optim: sqrt and cosine decay, min_lr_factor", "[optim]") {
  LRSchedulerConfig c;
  c.warmup_steps = 0;
  c.decay_type = DecayType::kCosine;
  c.min_lr_factor = 0.1;
  LRSchedule cosine(c, 4);  // decay 4, stable 1: progress 0, 1/4, 2/4, 3/4
  CHECK(cosine.factor(1) == Approx(1.0));
  CHECK(cosine.factor(2) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(cosine.factor(4) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.75))));
  c.decay_type = DecayType::kSqrt;
  c.min_lr_factor = 0.0;
  LRSchedule sqrt_decay(c, 4);
  CHECK(sqrt_decay.factor(3) == Approx(1 - std::sqrt(0.5)));
}

TEST_CASE("optim: warmup longer than training and decay_ratio rounding are clamped like torchtitan",
          "[optim]") {
  LRSchedulerConfig c;
  c.warmup_steps = 50;
  LRSchedule s(c, 10);
  CHECK(s.warmup_steps() == 10);
  CHECK(s.factor(5) == Approx(0.5));
  c.warmup_steps = 0;
  c.decay_ratio = 0.25;  // 10 * 0.25 = 2.5 -> round half to even -> 2
  CHECK(LRSchedule(c, 10).decay_steps() == 2);
  c.decay_ratio = 0.35;  // 3.5 -> 4
  CHECK(LRSchedule(c, 10).decay_steps() == 4);
}

TEST_CASE("optim: AdamW carries the configured hyper-parameters and the set lr", "[optim]") {
  auto p = torch::zeros({3}, torch::requires_grad());
  OptimizerConfig c;
  auto opt = build_optimizer({p}, c);
  set_learning_rate(*opt, 1.25e-4);
  auto& o = static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[0].options());
  CHECK(o.lr() == 1.25e-4);
  CHECK(std::get<0>(o.betas()) == 0.9);
  CHECK(std::get<1>(o.betas()) == 0.95);
  CHECK(o.eps() == 1e-8);
  CHECK(o.weight_decay() == 0.1);
}

TEST_CASE("optim: clipping returns the norm before clipping and scales to max_norm", "[optim]") {
  auto a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  CHECK(clip_grad_norm({a, b}, 1.0) == Approx(5.0));
  CHECK(a.grad()[0].item<double>() == Approx(0.6).epsilon(1e-5));
  CHECK(b.grad()[0].item<double>() == Approx(0.8).epsilon(1e-5));
}

namespace {
// Parameters of sizes that leave every tail length, and one that spans several parallel tasks.
std::vector<at::Tensor> adamw_test_params() {
  std::vector<at::Tensor> params;
  for (int64_t n : {1, 7, 8, 9, 70001}) params.push_back(at::randn({n}).requires_grad_());
  params.push_back(at::randn({24, 33}).requires_grad_());
  return params;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// Runs `steps` steps of `optimizer` over params with gradients drawn from seed 7.
void run_adamw(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params,
               int steps) {
  torch::manual_seed(7);
  for (int s = 0; s < steps; ++s) {
    for (const auto& p : params) p.mutable_grad() = at::randn(p.sizes());
    optimizer.step();
  }
}

torch::optim::AdamWOptions adamw_test_options() {
  return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
}
}  // namespace

TEST_CASE(
    "optim: the fused AdamW step, at each vector width, equals libtorch's over ten steps, params "
    "and state",
    "[optim]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(0);
    auto fused_params = adamw_test_params();
    auto torch_params = clones(fused_params);
    FusedAdamW fused(fused_params, adamw_test_options());
    torch::optim::AdamW reference(torch_params, adamw_test_options());
    run_adamw(fused, fused_params, 10);
    run_adamw(reference, torch_params, 10);
    for (size_t i = 0; i < fused_params.size(); ++i) {
      INFO("parameter " << i << " of " << fused_params[i].numel() << " elements");
      CHECK(at::allclose(fused_params[i], torch_params[i], 1e-6, 1e-7));
      const auto& f = static_cast<torch::optim::AdamWParamState&>(
          *fused.state().at(adamw_state_key(fused_params[i])));
      const auto& t = static_cast<torch::optim::AdamWParamState&>(
          *reference.state().at(adamw_state_key(torch_params[i])));
      CHECK(f.step() == 10);
      CHECK(at::allclose(f.exp_avg(), t.exp_avg(), 1e-6, 1e-8));
      CHECK(at::allclose(f.exp_avg_sq(), t.exp_avg_sq(), 1e-6, 1e-10));
    }
  }
}

TEST_CASE(
    "optim: the fused AdamW step, at each vector width, is bitwise the same on 1 and 2 intra-op "
    "threads",
    "[optim]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(0);
    auto one = adamw_test_params();
    auto two = clones(one);
    const int previous = at::get_num_threads();
    at::set_num_threads(1);
    FusedAdamW single(one, adamw_test_options());
    run_adamw(single, one, 3);
    at::set_num_threads(2);
    FusedAdamW pair(two, adamw_test_options());
    run_adamw(pair, two, 3);
    at::set_num_threads(previous);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("parameter " << i);
      CHECK(at::equal(one[i], two[i]));
    }
  }
}

namespace {

// One measured step of a fresh FusedAdamW over `params` (gradients from seed 7), after two
// unmeasured ones: each parameter's measured sums, and the weights before the measured step.
struct MeasuredStep {
  std::vector<UpdateSquares> squares;
  std::vector<at::Tensor> before;
};
MeasuredStep measured_step(const std::vector<at::Tensor>& params,
                           const torch::optim::AdamWOptions& options) {
  FusedAdamW optimizer(params, options);
  run_adamw(optimizer, params, 2);
  MeasuredStep out;
  for (const auto& p : params) out.before.push_back(p.detach().clone());
  optimizer.measure_next_step(params);
  for (const auto& p : params) p.mutable_grad() = at::randn(p.sizes());
  optimizer.step();
  for (const auto& p : params) {
    REQUIRE(optimizer.covers(p));
    const auto squares = optimizer.measured(p);
    REQUIRE(squares.has_value());
    out.squares.push_back(*squares);
  }
  return out;
}

double float64_squares(const at::Tensor& t) {
  return t.detach().to(at::kDouble).square().sum().item<double>();
}

}  // namespace

TEST_CASE(
    "optim: a measured fused AdamW step updates the same bits as an unmeasured one, and its sums "
    "are float64's of the weights and of their change, the same on 1 and 2 threads",
    "[optim]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  // eps 0: a tail's padding lanes divide 0 by 0, which must not reach the sums.
  for (double eps : {1e-8, 0.0}) {
    for (VectorIsa isa : test::vector_isas_here()) {
      INFO("vector width " << test::isa_name(isa) << ", eps " << eps);
      test::VectorIsaScope width(isa);
      const auto options = adamw_test_options().eps(eps);
      torch::manual_seed(0);
      auto plain = adamw_test_params();
      auto one = clones(plain), two = clones(plain);
      FusedAdamW unmeasured(plain, options);
      run_adamw(unmeasured, plain, 3);
      const int previous = at::get_num_threads();
      at::set_num_threads(1);
      const MeasuredStep single = measured_step(one, options);
      at::set_num_threads(2);
      const MeasuredStep pair = measured_step(two, options);
      at::set_num_threads(previous);
      for (size_t i = 0; i < plain.size(); ++i) {
        INFO("parameter " << i << " of " << plain[i].numel() << " elements");
        CHECK(at::equal(one[i], plain[i]));
        CHECK(at::equal(two[i], plain[i]));
        const double change = float64_squares(single.before[i] - one[i]);
        const double weights = float64_squares(one[i]);
        CHECK(std::isfinite(single.squares[i].change));
        CHECK(single.squares[i].change == Approx(change).epsilon(1e-12));
        CHECK(single.squares[i].weights == Approx(weights).epsilon(1e-12));
        CHECK(single.squares[i].change > 0);
        CHECK(single.squares[i].change == pair.squares[i].change);
        CHECK(single.squares[i].weights == pair.squares[i].weights);
      }
    }
  }
}

TEST_CASE(
    "optim: the fused AdamW measures only the step after measure_next_step, and only the views "
    "that step updates",
    "[optim]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  auto params = adamw_test_params();
  const at::Tensor stranger = at::randn({5}).requires_grad_();
  FusedAdamW optimizer(params, adamw_test_options());
  CHECK_FALSE(optimizer.covers(stranger));
  CHECK_FALSE(optimizer.covers(params[0].detach().clone()));
  CHECK_FALSE(optimizer.covers(params[5].detach().t()));  // not contiguous
  CHECK(update_measurer(optimizer) == &optimizer);
  run_adamw(optimizer, params, 1);
  CHECK_FALSE(optimizer.measured(params[0]).has_value());
  optimizer.measure_next_step(params);
  CHECK_FALSE(optimizer.measured(params[0]).has_value());  // no step yet
  params[1].mutable_grad() = at::Tensor();                 // this step leaves it alone
  optimizer.step();
  CHECK(optimizer.measured(params[0]).has_value());
  CHECK_FALSE(optimizer.measured(params[1]).has_value());
  optimizer.measure_next_step(params);  // forgets the last measurement
  CHECK_FALSE(optimizer.measured(params[0]).has_value());
  torch::optim::AdamW plain(clones(params), adamw_test_options());
  CHECK(update_measurer(plain) == nullptr);
}

TEST_CASE(
    "optim: the fused AdamW measures pieces of a parameter (FSDP's views of a shard) as float64 "
    "sums over each piece, and updates the rest the same",
    "[optim]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  auto params = adamw_test_params();  // params[4] has 70001 elements: pieces across blocks
  auto twin = clones(params);
  FusedAdamW optimizer(params, adamw_test_options()), plain(twin, adamw_test_options());
  run_adamw(plain, twin, 3);
  run_adamw(optimizer, params, 2);
  const at::Tensor flat = params[4].detach();
  const std::vector<at::Tensor> pieces = {flat.narrow(0, 5, 40000), flat.narrow(0, 40005, 29990),
                                          params[5].detach().view(-1).narrow(0, 3, 17)};
  for (const auto& piece : pieces) CHECK(optimizer.covers(piece));
  std::vector<at::Tensor> before;
  for (const auto& piece : pieces) before.push_back(piece.clone());
  optimizer.measure_next_step(pieces);
  for (const auto& p : params) p.mutable_grad() = at::randn(p.sizes());
  optimizer.step();
  for (size_t i = 0; i < params.size(); ++i) CHECK(at::equal(params[i], twin[i]));
  for (size_t i = 0; i < pieces.size(); ++i) {
    INFO("piece " << i);
    const auto squares = optimizer.measured(pieces[i]);
    REQUIRE(squares.has_value());
    CHECK(squares->weights == Approx(float64_squares(pieces[i])).epsilon(1e-12));
    CHECK(squares->change == Approx(float64_squares(before[i] - pieces[i])).epsilon(1e-12));
  }
  CHECK_THROWS_WITH(optimizer.measure_next_step({flat.narrow(0, 0, 10), flat.narrow(0, 9, 10)}),
                    Catch::Contains("two measured views overlap"));
  CHECK_THROWS_WITH(optimizer.measure_next_step({at::zeros({3})}),
                    Catch::Contains("not within one of its parameters"));
  const at::Tensor empty = flat.narrow(0, 7, 0);  // inside pieces[0]: overlaps nothing
  optimizer.measure_next_step({pieces[0], empty});
  optimizer.step();
  REQUIRE(optimizer.measured(empty).has_value());
  CHECK(optimizer.measured(empty)->change == 0);
  CHECK(optimizer.measured(pieces[0])->change > 0);
}

TEST_CASE("optim: build_optimizer runs the fused step on CPU parameters where this CPU can",
          "[optim]") {
  auto p = torch::zeros({3}, torch::requires_grad());
  auto opt = build_optimizer({p}, OptimizerConfig{});
  const bool fused = dynamic_cast<FusedAdamW*>(opt.get()) != nullptr;
  CHECK(fused == cpu_has_avx2_fma());
  CHECK(fused == (adamw_kernel_for(at::kCPU) != AdamWKernel::kTorch));
  CHECK(adamw_kernel_of(*opt) == adamw_kernel_for(at::kCPU));
}

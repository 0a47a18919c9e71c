// Numerical parity with an independent PyTorch implementation (scripts/reference/): the state
// file holds the reference's config, weights, batch, logits, loss, every gradient, and the loss,
// grad norm and LR of 10 AdamW steps. titan-train's model and training step must reproduce them.
//
// Tolerances (float32 on CPU). Both sides compute the same math with different kernels and
// summation orders (blocked attention vs q@k^T + mask + softmax, libtorch vs PyTorch AdamW), so
// values agree to a few float32 ulps scaled by the depth of the computation, not bitwise:
//   logits, loss:     max |diff| <= 1e-5 x max |reference|
//   gradients:        max |diff| <= 1e-5 x max |reference| per tensor
//   10-step losses:   relative 1e-5; grad norms relative 1e-5; LRs exact after rounding to float32
//   (the file stores float32)
// Measured (libtorch 1.13 vs PyTorch 1.13, CPU): worst gradient 1.9e-7 relative
// (layers.0.ffn_norm.weight); the 10 step losses equal the stored float32 values. Run the test
// with -s to see the figures.
#include <fmt/format.h>
#include <torch/torch.h>

#include <map>

#include "ac/apply.h"
#include "catch_torch.h"
#include "llama3/transformer.h"
#include "models/registry.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "reference_state.h"
#include "reference_steps.h"
#include "step/step.h"
#include "test_util.h"

using namespace titan;
using titan::test::ReferenceState;

namespace {

constexpr double kValueTolerance = 1e-5;
constexpr double kGradTolerance = 1e-5;
constexpr double kStepTolerance = 1e-5;

const ReferenceState& reference() {
  static ReferenceState state =
      test::load_reference_state(test::source_dir() + "/test/data/llama_reference.bin");
  return state;
}

ModelArgs reference_args(const ReferenceState& ref) {
  ModelArgs a;
  a.dim = static_cast<int64_t>(ref.number("dim"));
  a.n_layers = static_cast<int64_t>(ref.number("n_layers"));
  a.n_heads = static_cast<int64_t>(ref.number("n_heads"));
  a.n_kv_heads = static_cast<int64_t>(ref.number("n_kv_heads"));
  a.vocab_size = static_cast<int64_t>(ref.number("vocab_size"));
  a.multiple_of = static_cast<int64_t>(ref.number("multiple_of"));
  a.norm_eps = ref.number("norm_eps");
  a.rope_theta = ref.number("rope_theta");
  a.rope_scaling.factor = ref.number("rope_scaling_factor");
  a.rope_scaling.low_freq_factor = ref.number("rope_low_freq_factor");
  a.rope_scaling.high_freq_factor = ref.number("rope_high_freq_factor");
  a.rope_scaling.original_max_position = ref.number("rope_original_max_position");
  a.max_seq_len = static_cast<int64_t>(ref.number("seq_len"));
  return a;
}

// Each test runs without activation checkpointing, with every block checkpointed, and with
// torchtitan's selective every-2nd-block (layers.1 of 2): checkpointing must not change a bit.
ActivationCheckpointConfig ac_mode(const std::string& mode) {
  ActivationCheckpointConfig c;
  c.mode = parse_enum<AcMode>(mode).value();
  c.determinism_check = RecomputeCheck::kBitwise;
  return c;
}

// A model with the reference's weights, its blocks checkpointed per `ac_mode`. Every model
// parameter must have a reference record of the same shape, and every reference parameter a
// model parameter.
Transformer reference_model(const ReferenceState& ref, const std::string& ac_mode_name) {
  Transformer model(reference_args(ref));
  torch::NoGradGuard no_grad;
  size_t loaded = 0;
  for (auto& p : model->named_parameters()) {
    const auto& weight = ref.tensor("param/" + p.key());
    INFO(p.key());
    REQUIRE(weight.sizes() == p.value().sizes());
    p.value().copy_(weight);
    ++loaded;
  }
  size_t in_file = 0;
  for (auto& name : ref.order) in_file += name.rfind("param/", 0) == 0;
  REQUIRE(loaded == in_file);
  auto wrapped = ac::apply_activation_checkpointing(model, ac_mode(ac_mode_name)).names;
  // The reference has 2 layers: full wraps both, selective 2 the second, none neither.
  const std::map<std::string, std::vector<std::string>> expected = {
      {"none", {}}, {"full", {"layers.0", "layers.1"}}, {"selective", {"layers.1"}}};
  REQUIRE(wrapped == expected.at(ac_mode_name));
  return model;
}

struct Mismatch {
  std::string name;
  double max_abs = 0, relative = 0, tolerance = 0;
};

// max |got - expected| relative to max |expected|.
Mismatch compare(const std::string& name, const at::Tensor& got, const at::Tensor& expected,
                 double tolerance) {
  Mismatch m{name, 0, 0, tolerance};
  m.max_abs = (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
  double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  m.relative = m.max_abs / scale;
  return m;
}

// Fails naming the first tensor out of tolerance; reports the worst relative difference.
void check_all(const std::vector<Mismatch>& results) {
  const Mismatch* worst = &results.front();
  for (const auto& m : results) {
    if (m.relative > worst->relative) worst = &m;
  }
  INFO(fmt::format("worst: {} relative {:.3g} (max abs {:.3g})", worst->name, worst->relative,
                   worst->max_abs));
  for (const auto& m : results) {
    if (!(m.relative <= m.tolerance)) {
      FAIL(
          fmt::format("first mismatch: {}: max abs diff {:.6g}, relative {:.6g} > tolerance {:.1g}",
                      m.name, m.max_abs, m.relative, m.tolerance));
    }
  }
  SUCCEED(fmt::format("{} tensors within tolerance", results.size()));
}

}  // namespace

TEST_CASE("parity: logits, loss and every gradient match the PyTorch reference", "[parity]") {
  const auto& ref = reference();
  const std::string mode = GENERATE(as<std::string>{}, "none", "full", "selective");
  INFO("activation_checkpoint.mode = " << mode);
  Transformer model = reference_model(ref, mode);
  const auto& inputs = ref.tensor("inputs");
  const auto& targets = ref.tensor("targets");
  auto logits = model->forward(inputs);
  auto loss = summed_cross_entropy(logits, targets) / static_cast<double>(targets.numel());
  loss.backward();

  std::vector<Mismatch> results = {
      compare("logits", logits.detach(), ref.tensor("logits"), kValueTolerance),
      compare("loss", loss.detach(), ref.tensor("loss"), kValueTolerance)};
  for (auto& p : model->named_parameters()) {
    results.push_back(compare("grad/" + p.key(), p.value().grad(), ref.tensor("grad/" + p.key()),
                              kGradTolerance));
  }
  check_all(results);
}

TEST_CASE(
    "parity: ten AdamW steps with warmup, decay and clipping match the reference, batch-invariant "
    "or not",
    "[parity]") {
  const auto& ref = reference();
  const std::string mode = GENERATE(as<std::string>{}, "none", "full", "selective");
  // Batch invariance runs each sequence alone and sums them in a pairwise tree.
  const bool batch_invariant = GENERATE(false, true);
  INFO("activation_checkpoint.mode = " << mode << ", batch_invariant " << batch_invariant);
  const double worst = test::check_reference_steps(ref, reference_model(ref, mode), batch_invariant,
                                                   {kStepTolerance, kStepTolerance});
  SUCCEED(fmt::format("worst relative step-loss difference {:.3g}", worst));
}

TEST_CASE(
    "parity: a train step drops the gradients the last one left, as PyTorch 2's zero_grad does, "
    "so a parameter the backward does not reach is left as it was",
    "[parity]") {
  Transformer model(flavor_args("llama3", "tiny"));
  std::vector<at::Tensor> params = model->parameters();
  // Stepped by the optimizer but outside the model, with a gradient left from "an earlier step".
  at::Tensor outside = at::ones({8}).requires_grad_();
  outside.mutable_grad() = at::ones({8});
  std::vector<at::Tensor> stepped = params;
  stepped.push_back(outside);
  OptimizerConfig opt_config;
  opt_config.weight_decay = 0.1;  // zeroed in place, the gradient would still decay the weight
  auto optimizer = build_optimizer(stepped, opt_config);
  auto generator = at::detail::createCPUGenerator(5);
  const int64_t vocab = flavor_args("llama3", "tiny").vocab_size;
  std::vector<Batch> batches = {
      Batch{at::randint(vocab, {2, 8}, generator), at::randint(vocab, {2, 8}, generator), {}}};
  StepTarget target;
  target.model = model;
  target.params = params;
  target.optimizer = optimizer.get();
  for (int64_t step = 1; step <= 2; ++step) {
    StepRequest request;
    request.step = step;
    request.batches = &batches;
    request.lr = 1e-2;
    run_step(target, StepOptions(), request);
    INFO("step " << step);
    CHECK_FALSE(outside.grad().defined());
    CHECK(at::equal(outside, at::ones({8})));
    for (const auto& p : params) CHECK(p.grad().defined());
  }
}

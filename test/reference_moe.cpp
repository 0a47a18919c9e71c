#include "reference_moe.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "ac/apply.h"
#include "catch_torch.h"
#include "reference_steps.h"

namespace titan::test {
namespace {

// max |got - want| relative to max |want|: float32 with other kernels and summation orders.
double relative(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>() /
         std::max(want.abs().max().item<double>(), 1e-30);
}

}  // namespace

int64_t integer(const ReferenceState& ref, const std::string& key) {
  return static_cast<int64_t>(ref.number(key));
}

MoEArgs reference_moe_args(const ReferenceState& ref) {
  MoEArgs m;
  m.num_experts = integer(ref, "num_experts"), m.top_k = integer(ref, "top_k");
  m.num_shared_experts = integer(ref, "num_shared_experts");
  m.score_func = ref.text("score_func");
  m.route_norm = ref.number("route_norm") != 0, m.route_scale = ref.number("route_scale");
  m.gate_bias = ref.number("gate_bias") != 0;
  m.score_before_experts = ref.number("score_before_experts") != 0;
  if (integer(ref, "num_expert_groups") > 0) {
    m.num_expert_groups = integer(ref, "num_expert_groups");
    m.num_limited_groups = integer(ref, "num_limited_groups");
  }
  m.load_balance_coeff = ref.number("load_balance_coeff");
  m.update_expert_bias = ref.number("update_expert_bias") != 0;
  return m;
}

Model with_reference_weights(Model model, const ReferenceState& ref, AcMode ac) {
  {
    torch::NoGradGuard no_grad;
    size_t in_file = 0;
    for (const auto& name : ref.order) in_file += name.rfind("param/", 0) == 0;
    const auto named = model->named_parameters();
    REQUIRE(named.size() == in_file);
    for (auto& p : named) {
      INFO(p.key());
      const at::Tensor& weight = ref.tensor("param/" + p.key());
      REQUIRE(weight.sizes() == p.value().sizes());
      p.value().copy_(weight);
    }
  }
  ActivationCheckpointConfig checkpointing;
  checkpointing.mode = ac;
  checkpointing.determinism_check = RecomputeCheck::kBitwise;
  ac::apply_activation_checkpointing(model, checkpointing);
  return model;
}

void check_reference_gradients(const ReferenceState& ref, Model model) {
  const at::Tensor logits = model->forward(ref.tensor("inputs"));
  const at::Tensor loss =
      at::cross_entropy_loss(logits.flatten(0, 1), ref.tensor("targets").flatten(0, 1));
  loss.backward();
  CHECK(relative(logits.detach(), ref.tensor("logits")) <= 1e-5);
  CHECK(std::abs(loss.item<double>() / ref.tensor("loss").item<double>() - 1) <= 1e-5);
  double squares = 0;
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    const at::Tensor grad = p.value().grad();
    CHECK(relative(grad, ref.tensor("grad/" + p.key())) <= 1e-5);
    squares += grad.to(at::kDouble).square().sum().item<double>();
  }
  CHECK(std::abs(std::sqrt(squares) / ref.tensor("grad_norm").item<double>() - 1) <= 1e-4);
}

void check_reference_training(const ReferenceState& ref, Model model, bool batch_invariant) {
  StepTolerances tol;
  tol.grad_norm = 1e-4;
  check_reference_steps(ref, model, batch_invariant, tol);
  const auto loads = model->expert_loads();
  REQUIRE_FALSE(loads.empty());
  for (const ExpertLoad& load : loads) {
    INFO(load.name);
    const at::Tensor& want = ref.tensor("final/" + load.name + ".expert_bias");
    CHECK((load.expert_bias - want).abs().max().item<float>() <= 1e-7f);
    CHECK(load.tokens_per_expert.sum().item<double>() ==
          static_cast<double>(ref.tensor("inputs").numel() * integer(ref, "top_k")));
    if (ref.number("update_expert_bias") == 0)
      CHECK(load.expert_bias.abs().max().item<float>() == 0);
  }
}

}  // namespace titan::test

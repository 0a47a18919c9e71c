// The mixture-of-experts layer (lib/moe) in Qwen3-MoE: top-k's total order on ties, node-limited
// routing, forced load balance, tokens counted once per step whatever AC recomputes, the flavors'
// sizes, and parity with a PyTorch reference of torchtitan v0.2.2's MoE
// (scripts/reference/qwen3_moe_reference.py): one forward and backward, ten AdamW steps, and the
// expert biases load balancing leaves.
#include <torch/torch.h>

#include <cmath>

#include "ac/apply.h"
#include "catch_torch.h"
#include "models/registry.h"
#include "moe/load_balance.h"
#include "moe/router.h"
#include "qwen3/qwen3.h"
#include "reference_state.h"
#include "reference_steps.h"
#include "step/step.h"
#include "test_util.h"

using namespace titan;

TEST_CASE("moe: top-k breaks exact ties by the lower expert index, best first", "[moe]") {
  const at::Tensor scores = at::tensor({0.25f, 0.5f, 0.25f, 0.5f, 0.1f, 0.25f}).view({1, 6});
  CHECK(at::equal(moe::top_k_indices(scores, 4), at::tensor({1L, 3L, 0L, 2L}).view({1, 4})));
  // Many rows of ties: the same choice on every row, whatever the thread count.
  const at::Tensor many = at::full({4096, 64}, 0.125f);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    const at::Tensor chosen = moe::top_k_indices(many, 8);
    CHECK(at::equal(chosen, at::arange(8, at::kLong).expand({4096, 8})));
  }
}

namespace {
MoEArgs router_args() {
  MoEArgs m;
  m.num_experts = 8, m.top_k = 2, m.score_func = "sigmoid", m.num_shared_experts = 0;
  return m;
}
}  // namespace

TEST_CASE("moe: node-limited routing chooses only within the groups of the best two scores",
          "[moe]") {
  MoEArgs m = router_args();
  m.num_expert_groups = 4, m.num_limited_groups = 1;
  moe::Router router(4, m);
  torch::NoGradGuard no_grad;
  router->gate->weight.zero_();
  // The bias makes experts 0 and 7 the two best, but group 1 (experts 2, 3) has the best pair.
  const at::Tensor bias = at::tensor({0.3f, 0.f, 0.2f, 0.2f, 0.f, 0.f, 0.f, 0.25f});
  const moe::Routing r = router(at::zeros({3, 4}), bias);
  CHECK(at::equal(r.selected, at::tensor({2L, 3L}).expand({3, 2})));
  // The gating weights are the unbiased scores: sigmoid(0) each.
  CHECK(at::allclose(r.top_scores, at::full({3, 2}, 0.5f)));
}

TEST_CASE("moe: debug.moe_force_load_balance routes round-robin, torchtitan's order", "[moe]") {
  MoEArgs m = router_args();
  m.top_k = 3, m.force_load_balance = true;
  moe::Router router(4, m);
  const moe::Routing r = router(at::randn({5, 4}), at::Tensor());
  CHECK(at::equal(r.selected, at::arange(15, at::kLong).view({5, 3}).remainder(8)));
}

TEST_CASE(
    "moe: debug.moe_bf16_experts computes the experts as torchtitan's grouped_mm path does: bf16 "
    "input and weights, the output cast back",
    "[moe]") {
  moe::GroupedExperts exact(8, 16, 3), bf16(8, 16, 3, true);
  torch::NoGradGuard no_grad;
  for (auto* e : {&exact, &bf16}) {
    (*e)->w1.normal_(0, 0.5), (*e)->w2.normal_(0, 0.5), (*e)->w3.normal_(0, 0.5);
  }
  bf16->w1.copy_(exact->w1), bf16->w2.copy_(exact->w2), bf16->w3.copy_(exact->w3);
  const at::Tensor x = at::randn({7, 8});
  const std::vector<int64_t> rows = {3, 0, 4};
  const at::Tensor out = bf16(x, rows);
  CHECK(out.scalar_type() == at::kFloat);
  std::vector<at::Tensor> want;
  int64_t at_row = 0;
  for (int64_t e : {0, 2}) {
    const at::Tensor xe = x.narrow(0, at_row, rows[e]).to(at::kBFloat16);
    const auto w = [&](const at::Tensor& t) { return t[e].to(at::kBFloat16).t(); };
    want.push_back(at::matmul(at::silu(at::matmul(xe, w(exact->w1))) * at::matmul(xe, w(exact->w3)),
                              w(exact->w2)));
    at_row += rows[e];
  }
  CHECK(at::equal(out, at::cat(want).to(at::kFloat)));
  CHECK_FALSE(at::equal(out, exact(x, rows)));
}

TEST_CASE("moe: Qwen3-MoE flavors have torchtitan's shapes and Hugging Face's sizes", "[moe]") {
  const ModelArgs a = qwen3::flavor_args("30B-A3B");
  REQUIRE(a.moe);
  CHECK(a.moe->num_experts == 128);
  CHECK(a.moe->top_k == 8);
  CHECK(a.moe_inter_dim == 768);
  CHECK_FALSE(a.moe->update_expert_bias);  // torchtitan v0.2.2's qwen3 never updates it
  // Hugging Face's Qwen3-30B-A3B: 30,532,122,624 parameters, 3.35B of them active per token.
  CHECK(a.num_params() == 30532122624);
  CHECK(a.num_active_params() == 3353032704);
  const ModelArgs debug = qwen3::flavor_args("debugmodel_moe");
  CHECK(debug.moe->num_experts == 64);
  CHECK_FALSE(debug.tie_embeddings);
  Model model = build_model(qwen3::flavor_args("tiny_moe"));
  int64_t counted = 0;
  for (const auto& p : model->parameters()) counted += p.numel();
  CHECK(counted == qwen3::flavor_args("tiny_moe").num_params());
  CHECK(model->expert_loads().size() == 2);
  CHECK(model->named_buffers().contains("layers.1.moe.expert_bias"));
}

namespace {

const test::ReferenceState& moe_reference(const std::string& which) {
  static std::map<std::string, test::ReferenceState> loaded;
  auto it = loaded.find(which);
  if (it == loaded.end()) {
    it = loaded
             .emplace(which, test::load_reference_state(test::source_dir() + "/test/data/moe_" +
                                                        which + "_reference.bin"))
             .first;
  }
  return it->second;
}

int64_t integer(const test::ReferenceState& ref, const std::string& key) {
  return static_cast<int64_t>(ref.number(key));
}

// titan-train's Qwen3-MoE of the reference's shape and router, with its weights; every block
// checkpointed with `ac` full (bitwise recompute check), none without.
Model moe_reference_model(const test::ReferenceState& ref, AcMode ac = AcMode::kNone) {
  ModelArgs args = qwen3::flavor_args("tiny_moe");
  args.dim = integer(ref, "dim"), args.n_layers = integer(ref, "n_layers");
  args.n_heads = integer(ref, "n_heads"), args.n_kv_heads = integer(ref, "n_kv_heads");
  args.head_dim_override = integer(ref, "head_dim");
  args.hidden_dim = integer(ref, "hidden_dim"), args.vocab_size = integer(ref, "vocab_size");
  args.norm_eps = ref.number("norm_eps"), args.rope_theta = ref.number("rope_theta");
  args.tie_embeddings = false, args.max_seq_len = integer(ref, "seq_len");
  args.moe_inter_dim = integer(ref, "moe_inter_dim");
  args.n_dense_layers = integer(ref, "n_dense_layers");
  MoEArgs& m = *args.moe;
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
  Model model = build_model(args);
  {
    torch::NoGradGuard no_grad;
    const auto named = model->named_parameters();
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

double relative(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>() /
         std::max(want.abs().max().item<double>(), 1e-30);
}

}  // namespace

TEST_CASE(
    "moe: logits, loss, every gradient and the gradient norm match the PyTorch reference of "
    "torchtitan's MoE (Qwen3-MoE's router, and every other router option)",
    "[moe][parity]") {
  const std::string which = GENERATE("qwen3", "router");
  INFO(which);
  const test::ReferenceState& ref = moe_reference(which);
  Model model = moe_reference_model(ref);
  const at::Tensor logits = model->forward(ref.tensor("inputs"));
  const at::Tensor loss =
      at::cross_entropy_loss(logits.flatten(0, 1), ref.tensor("targets").flatten(0, 1));
  loss.backward();
  CHECK(relative(logits.detach(), ref.tensor("logits")) <= 1e-5);
  CHECK(std::abs(loss.item<double>() / ref.tensor("loss").item<double>() - 1) <= 1e-5);
  double squares = 0;
  size_t in_file = 0;
  for (const auto& name : ref.order) in_file += name.rfind("param/", 0) == 0;
  CHECK(model->named_parameters().size() == in_file);
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    const at::Tensor grad = p.value().grad();
    CHECK(relative(grad, ref.tensor("grad/" + p.key())) <= 1e-5);
    squares += grad.to(at::kDouble).square().sum().item<double>();
  }
  CHECK(std::abs(std::sqrt(squares) / ref.tensor("grad_norm").item<double>() - 1) <= 1e-4);
}

TEST_CASE(
    "moe: ten AdamW steps match the reference's, and load balancing leaves its expert biases, "
    "with and without activation checkpointing and batch invariance",
    "[moe][parity]") {
  const std::string which = GENERATE("qwen3", "router");
  const AcMode ac = GENERATE(AcMode::kNone, AcMode::kFull);
  const bool batch_invariant = GENERATE(false, true);
  INFO(which << ", AC " << to_string(ac) << ", batch_invariant " << batch_invariant);
  const test::ReferenceState& ref = moe_reference(which);
  Model model = moe_reference_model(ref, ac);
  test::StepTolerances tol;
  tol.grad_norm = 1e-4;
  test::check_reference_steps(ref, model, batch_invariant, tol);
  const auto loads = model->expert_loads();
  REQUIRE_FALSE(loads.empty());
  for (const ExpertLoad& load : loads) {
    INFO(load.name);
    const at::Tensor& want = ref.tensor("final/" + load.name + ".expert_bias");
    CHECK((load.expert_bias - want).abs().max().item<float>() <= 1e-7f);
    // The last step's tokens, counted once whatever AC recomputed: every token's top_k choices.
    CHECK(load.tokens_per_expert.sum().item<double>() ==
          static_cast<double>(ref.tensor("inputs").numel() * integer(ref, "top_k")));
  }
  if (ref.number("update_expert_bias") == 0) {
    for (const ExpertLoad& load : loads) CHECK(load.expert_bias.abs().max().item<float>() == 0);
  }
}

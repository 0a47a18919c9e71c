// The mixture-of-experts layer (lib/moe) in Qwen3-MoE: top-k's total order on ties, node-limited
// routing, forced load balance, tokens counted once per step whatever AC recomputes, the flavors'
// sizes, and parity with a PyTorch reference of torchtitan v0.2.2's MoE
// (scripts/reference/qwen3_moe_reference.py): one forward and backward, ten AdamW steps, and the
// expert biases load balancing leaves.
#include <torch/torch.h>

#include <cmath>

#include "catch_torch.h"
#include "models/registry.h"
#include "moe/load_balance.h"
#include "moe/moe.h"
#include "moe/router.h"
#include "qwen3/qwen3.h"
#include "reference_moe.h"
#include "reference_state.h"
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

TEST_CASE("moe: a layer that cannot route is refused naming the field", "[moe]") {
  const auto refused = [](MoEArgs m, const std::string& message) {
    INFO(message);
    CHECK_THROWS_WITH(moe::MoE(m, 8, 16), Catch::Contains(message));
  };
  MoEArgs m = router_args();
  m.top_k = 9;
  refused(m, "top_k 9 of 8 experts");
  m = router_args();
  m.num_expert_groups = 3, m.num_limited_groups = 1;
  refused(m, "num_expert_groups 3 does not divide 8 experts into groups of 2 or more");
  m.num_expert_groups = 8;
  refused(m, "num_expert_groups 8 does not divide 8 experts");
  m.num_expert_groups = 4, m.num_limited_groups = 5;
  refused(m, "num_limited_groups 5 of 4 groups");
  m.num_limited_groups = 1, m.top_k = 3;
  refused(m, "top_k 3 exceeds the 2 experts of 1 limited groups");
  m = router_args();
  m.score_func = "relu";
  refused(m, "score_func \"relu\" is neither softmax nor sigmoid");
  for (const std::string& family : model_families()) {
    for (const std::string& flavor : family_flavors(family)) {
      const ModelArgs args = flavor_args(family, flavor);
      if (args.moe) CHECK_NOTHROW(moe::check_moe_args(*args.moe));
    }
  }
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

// titan-train's Qwen3-MoE of the reference's shape and router, with its weights.
Model moe_reference_model(const test::ReferenceState& ref, AcMode ac = AcMode::kNone) {
  using test::integer;
  ModelArgs args = qwen3::flavor_args("tiny_moe");
  args.dim = integer(ref, "dim"), args.n_layers = integer(ref, "n_layers");
  args.n_heads = integer(ref, "n_heads"), args.n_kv_heads = integer(ref, "n_kv_heads");
  args.head_dim_override = integer(ref, "head_dim");
  args.hidden_dim = integer(ref, "hidden_dim"), args.vocab_size = integer(ref, "vocab_size");
  args.norm_eps = ref.number("norm_eps"), args.rope_theta = ref.number("rope_theta");
  args.tie_embeddings = false, args.max_seq_len = integer(ref, "seq_len");
  args.moe_inter_dim = integer(ref, "moe_inter_dim");
  args.n_dense_layers = integer(ref, "n_dense_layers");
  args.moe = test::reference_moe_args(ref);
  return test::with_reference_weights(build_model(args), ref, ac);
}

}  // namespace

TEST_CASE(
    "moe: logits, loss, every gradient and the gradient norm match the PyTorch reference of "
    "torchtitan's MoE (Qwen3-MoE's router, and every other router option)",
    "[moe][parity]") {
  const std::string which = GENERATE("qwen3", "router");
  INFO(which);
  const test::ReferenceState& ref = moe_reference(which);
  test::check_reference_gradients(ref, moe_reference_model(ref));
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
  test::check_reference_training(ref, moe_reference_model(ref, ac), batch_invariant);
}

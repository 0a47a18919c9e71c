// DeepSeek-V3 (lib/deepseek_v3): torchtitan's flavors and their sizes, YaRN's table against its
// formula, and parity with a PyTorch reference of torchtitan's model
// (scripts/reference/deepseek_v3_reference.py): one forward and backward, ten AdamW steps with
// load balancing, under activation checkpointing and batch invariance.
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "catch_torch.h"
#include "config/loader.h"
#include "deepseek_v3/attention.h"
#include "deepseek_v3/flavors.h"
#include "models/registry.h"
#include "reference_moe.h"
#include "test_util.h"

using namespace titan;

TEST_CASE("deepseek_v3: torchtitan's flavors, their shapes and parameter counts", "[model][moe]") {
  CHECK(deepseek_v3::flavors() ==
        std::vector<std::string>{"tiny", "debugmodel", "16B", "236B", "671B"});
  const ModelArgs big = deepseek_v3::flavor_args("671B");
  CHECK(big.n_dense_layers == 3);
  CHECK(big.moe->score_func == "sigmoid");
  CHECK(big.moe->num_expert_groups == 8);
  CHECK(big.mla->q_lora_rank == 1536);
  CHECK(big.moe->update_expert_bias);  // torchtitan's deepseek_v3 balances its experts
  // Hugging Face's DeepSeek-V3 without its multi-token prediction layer holds 671,026,419,200
  // values: these parameters and, in its 58 MoE layers, 256 expert biases each
  // (e_score_correction_bias; a buffer here).
  CHECK(big.num_params() + 58 * 256 == 671026419200);
  // Every flavor small enough to build holds the parameters its args count.
  for (const char* flavor : {"tiny", "debugmodel"}) {
    INFO(flavor);
    ModelArgs args = deepseek_v3::flavor_args(flavor);
    args.max_seq_len = 64;
    Model model = build_model(args);
    int64_t counted = 0;
    for (const auto& p : model->parameters()) counted += p.numel();
    CHECK(counted == args.num_params());
  }
}

TEST_CASE(
    "deepseek_v3: a flavor torchtitan runs with document masks says at start-up that titan-train "
    "attends over the whole sequence",
    "[config]") {
  Config c;
  c.model.name = "deepseek_v3";
  c.model.flavor = "671B";
  const auto warnings = config_warnings(c);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("deepseek_v3 671B attends within documents in "
                                          "torchtitan (FlexAttention, block_causal masks)"));
  c.model.flavor = "debugmodel";
  CHECK(config_warnings(c).empty());
}

TEST_CASE("deepseek_v3: YaRN's RoPE table and softmax scale follow torchtitan's formulas",
          "[model]") {
  ModelArgs args = deepseek_v3::flavor_args("debugmodel");
  args.max_seq_len = 4096;  // at original_seq_len: plain RoPE
  const at::Tensor plain = deepseek_v3::precompute_freqs_cis(args);
  CHECK(plain.sizes() == std::vector<int64_t>{4096, 32});
  CHECK(deepseek_v3::softmax_scale(args) == 1.0 / std::sqrt(192.0));
  const double f1 = 1.0 / std::pow(10000.0, 2.0 / 64.0);
  CHECK(at::angle(plain[100][1]).item<double>() == Approx(std::remainder(100 * f1, 2 * M_PI)));
  args.max_seq_len = 8192;  // above it: YaRN
  const at::Tensor yarn = deepseek_v3::precompute_freqs_cis(args);
  // The fastest frequency (i = 0) rotates beta_fast times or more: unchanged; the slowest is
  // divided by rope_factor.
  CHECK(at::equal(yarn[7][0], plain[7][0]));
  const double slowest = 1.0 / std::pow(10000.0, 62.0 / 64.0) / 40.0;
  CHECK(at::angle(yarn[1000][31]).item<double>() == Approx(1000 * slowest).epsilon(1e-5));
  const double mscale = 0.1 * 0.7 * std::log(40.0) + 1.0;
  CHECK(deepseek_v3::softmax_scale(args) == Approx(mscale * mscale / std::sqrt(192.0)));
}

namespace {

const test::ReferenceState& reference(const std::string& which) {
  static std::map<std::string, test::ReferenceState> loaded;
  auto it = loaded.find(which);
  if (it == loaded.end()) {
    it = loaded
             .emplace(which,
                      test::load_reference_state(test::source_dir() + "/test/data/deepseek_v3_" +
                                                 which + "_reference.bin"))
             .first;
  }
  return it->second;
}

// titan-train's DeepSeek-V3 of the reference's shape, with its weights.
Model reference_model(const test::ReferenceState& ref, AcMode ac = AcMode::kNone) {
  using test::integer;
  ModelArgs args = deepseek_v3::flavor_args("tiny");
  args.dim = integer(ref, "dim"), args.n_layers = integer(ref, "n_layers");
  args.n_dense_layers = integer(ref, "n_dense_layers"), args.n_heads = integer(ref, "n_heads");
  args.hidden_dim = integer(ref, "hidden_dim"), args.vocab_size = integer(ref, "vocab_size");
  args.norm_eps = ref.number("norm_eps"), args.rope_theta = ref.number("rope_theta");
  args.max_seq_len = integer(ref, "seq_len");
  args.moe_inter_dim = integer(ref, "moe_inter_dim");
  MlaArgs& m = *args.mla;
  m.q_lora_rank = integer(ref, "q_lora_rank"), m.kv_lora_rank = integer(ref, "kv_lora_rank");
  m.qk_nope_head_dim = integer(ref, "qk_nope_head_dim");
  m.qk_rope_head_dim = integer(ref, "qk_rope_head_dim");
  m.v_head_dim = integer(ref, "v_head_dim");
  m.original_seq_len = integer(ref, "original_seq_len");
  m.rope_factor = ref.number("rope_factor"), m.mscale = ref.number("mscale");
  m.beta_fast = ref.number("beta_fast"), m.beta_slow = ref.number("beta_slow");
  args.moe = test::reference_moe_args(ref);
  return test::with_reference_weights(build_model(args), ref, ac);
}

}  // namespace

TEST_CASE(
    "deepseek_v3: logits, loss, every gradient and the gradient norm match the PyTorch reference "
    "of torchtitan's model (YaRN on with q projected directly, YaRN off with q through its "
    "bottleneck)",
    "[model][moe][parity]") {
  const std::string which = GENERATE("v3", "v3_lora");
  INFO(which);
  const test::ReferenceState& ref = reference(which);
  test::check_reference_gradients(ref, reference_model(ref));
}

TEST_CASE(
    "deepseek_v3: ten AdamW steps with load balancing match the reference's, with and without "
    "activation checkpointing and batch invariance",
    "[model][moe][parity]") {
  const std::string which = GENERATE("v3", "v3_lora");
  const AcMode ac = GENERATE(AcMode::kNone, AcMode::kFull);
  const bool batch_invariant = GENERATE(false, true);
  INFO(which << ", AC " << to_string(ac) << ", batch_invariant " << batch_invariant);
  const test::ReferenceState& ref = reference(which);
  test::check_reference_training(ref, reference_model(ref, ac), batch_invariant);
}

// Qwen3 (dense), the family lib/qwen3 builds: torchtitan's flavors and parameter names, the tied
// output, RoPE by rotate_half against the formula, q/k norms, torchtitan's init, the same bits
// from a shape-only model (FSDP's) as from a whole one, and parity with a PyTorch reference
// (scripts/reference/qwen3_reference.py: torchtitan v0.2.2's qwen3 model in plain PyTorch).
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "ac/apply.h"
#include "catch_torch.h"
#include "config/model_catalog.h"
#include "models/registry.h"
#include "qwen3/qwen3.h"
#include "reference_moe.h"
#include "reference_state.h"
#include "reference_steps.h"
#include "test_util.h"

using namespace titan;

namespace {
// debugmodel's shapes at 2 layers, a small SwiGLU and a short RoPE table: quick to build.
ModelArgs small_args(bool tied) {
  ModelArgs a = qwen3::flavor_args("debugmodel");
  a.n_layers = 2, a.hidden_dim = 64, a.max_seq_len = 16, a.vocab_size = 96;
  a.tie_embeddings = tied;
  return a;
}
}  // namespace

TEST_CASE("qwen3: torchtitan's dense flavors, their shapes and parameter counts", "[model]") {
  CHECK(qwen3::flavors() == std::vector<std::string>{"tiny", "debugmodel", "0.6B", "1.7B", "4B",
                                                     "8B", "14B", "32B", "tiny_moe",
                                                     "debugmodel_moe", "30B-A3B", "235B-A22B"});
  const ModelArgs small = qwen3::flavor_args("0.6B");
  CHECK(small.head_dim() == 128);  // not dim / n_heads = 64
  CHECK(small.ffn_hidden_dim() == 3072);
  CHECK(small.tie_embeddings);
  // Hugging Face's Qwen3-0.6B: 596,049,920 parameters, its lm_head the embedding.
  CHECK(small.num_params() == 596049920);
  CHECK_FALSE(qwen3::flavor_args("8B").tie_embeddings);
  CHECK_FALSE(qwen3::flavor_args("8B").moe);
  CHECK_THROWS_WITH(qwen3::flavor_args("30B"), "no qwen3 flavor \"30B\"");
  ModelArgs debug = qwen3::flavor_args("debugmodel");
  debug.max_seq_len = 8;
  Model model = build_model(debug);
  int64_t counted = 0;
  for (const auto& p : model->parameters()) counted += p.numel();
  CHECK(counted == debug.num_params());
  const auto named = model->named_parameters();
  CHECK(named["layers.7.attention.q_norm.weight"].sizes() == at::IntArrayRef{128});
  CHECK(named["layers.0.attention.wq.weight"].sizes() == at::IntArrayRef{16 * 128, 256});
  CHECK(named["layers.0.attention.wk.weight"].sizes() == at::IntArrayRef{8 * 128, 256});
  CHECK(named["layers.0.feed_forward.w1.weight"].sizes() == at::IntArrayRef{3072, 256});
  CHECK_FALSE(named.contains("output.weight"));  // tied: held once, as the embedding
}

TEST_CASE("qwen3: RoPE rotates each head's halves by rotate_half, as the formula says", "[model]") {
  const int64_t E = 8, T = 5;
  const double theta = 1e6;
  at::Tensor cache = qwen3::precompute_rope_cache(E, T, theta);
  REQUIRE(cache.sizes() == at::IntArrayRef{T, 2 * E});
  at::Tensor x = at::randn({1, T, 2, E});
  at::Tensor y = qwen3::apply_rope(x, cache);
  auto xa = x.accessor<float, 4>();
  auto ya = y.accessor<float, 4>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < E / 2; ++i) {
      const double angle = t / std::pow(theta, 2.0 * i / E);
      const double c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < 2; ++h) {
        const double a = xa[0][t][h][i], b = xa[0][t][h][i + E / 2];
        CHECK(std::abs(ya[0][t][h][i] - (a * c - b * s)) < 1e-5);
        CHECK(std::abs(ya[0][t][h][i + E / 2] - (b * c + a * s)) < 1e-5);
      }
    }
  }
}

TEST_CASE(
    "qwen3: the tied output is the embedding: one tensor, and its gradient the sum of an untied "
    "model's two",
    "[model]") {
  torch::manual_seed(7);
  qwen3::Qwen3 tied(small_args(true));
  tied->init_weights();
  qwen3::Qwen3 untied(small_args(false));
  {
    torch::NoGradGuard no_grad;
    const auto from = tied->named_parameters();
    for (auto& p : untied->named_parameters()) {
      p.value().copy_(p.key() == "output.weight" ? from["tok_embeddings.weight"] : from[p.key()]);
    }
  }
  const at::Tensor tokens = at::randint(96, {2, 12});
  Model(std::shared_ptr<ModelImpl>(tied.ptr()))->forward(tokens).square().sum().backward();
  Model(std::shared_ptr<ModelImpl>(untied.ptr()))->forward(tokens).square().sum().backward();
  const at::Tensor summed = untied->tok_embeddings->weight.grad() + untied->output->weight.grad();
  CHECK(at::allclose(tied->tok_embeddings->weight.grad(), summed, 1e-5, 1e-6));
  // the head unit holds the norm only: FSDP shards the shared tensor once, with the embedding
  CHECK(tied->unit_parameters(ParamUnit::kHead, -1).size() == 1);
}

TEST_CASE(
    "qwen3: torchtitan's init: norms at one, the tied weight truncated at 3 std of the output",
    "[model]") {
  torch::manual_seed(1);
  qwen3::Qwen3 model(small_args(true));
  model->init_weights();
  const auto named = model->named_parameters();
  for (const char* norm : {"norm.weight", "layers.1.attention.q_norm.weight",
                           "layers.1.attention.k_norm.weight", "layers.0.ffn_norm.weight"}) {
    INFO(norm);
    CHECK(at::equal(named[norm], at::ones_like(named[norm])));
  }
  // normal(0, 1) first, then the output's trunc_normal over it: nothing beyond 3 / sqrt(dim)
  const double bound = 3.0 / std::sqrt(256.0);
  CHECK(named["tok_embeddings.weight"].abs().max().item<double>() <= bound);
  CHECK(named["tok_embeddings.weight"].std().item<double>() > 0.8 / std::sqrt(256.0));
  // wo and w2, w3 shrink with depth (depth_init); wq stays at 0.02
  const double wo0 = named["layers.0.attention.wo.weight"].std().item<double>();
  const double wo1 = named["layers.1.attention.wo.weight"].std().item<double>();
  CHECK(std::abs(wo0 - 0.02 / std::sqrt(2.0)) < 0.002);
  CHECK(std::abs(wo1 - 0.02 / std::sqrt(4.0)) < 0.002);
  CHECK(std::abs(named["layers.1.attention.wq.weight"].std().item<double>() - 0.02) < 0.002);
}

TEST_CASE("qwen3: a shape-only model's init hands out exactly the bits a whole model's has",
          "[model]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    torch::manual_seed(11);
    Model whole = build_model(small_args(tied));
    whole->init_weights();
    torch::manual_seed(11);
    ParamMemory shape_only;
    shape_only.shape_only = true;
    Model empty = build_model(small_args(tied), shape_only);
    std::map<std::string, at::Tensor> kept;
    empty->init_weights(
        [&](const std::string& name, const at::Tensor& values) { kept[name] = values.clone(); });
    const auto named = whole->named_parameters();
    REQUIRE(kept.size() == named.size());
    for (const auto& p : named) {
      INFO(p.key());
      CHECK(at::equal(kept.at(p.key()), p.value()));
    }
  }
}

namespace {

const test::ReferenceState& qwen3_reference() {
  static const test::ReferenceState state =
      test::load_reference_state(test::source_dir() + "/test/data/qwen3_reference.bin");
  return state;
}

// titan-train's Qwen3 of the reference's shape, with its weights; every block checkpointed with
// `ac` full (bitwise recompute check), none without.
Model qwen3_reference_model(const test::ReferenceState& ref, AcMode ac = AcMode::kNone) {
  ModelArgs args = qwen3::flavor_args("debugmodel");
  args.dim = static_cast<int64_t>(ref.number("dim"));
  args.n_layers = static_cast<int64_t>(ref.number("n_layers"));
  args.n_heads = static_cast<int64_t>(ref.number("n_heads"));
  args.n_kv_heads = static_cast<int64_t>(ref.number("n_kv_heads"));
  args.head_dim_override = static_cast<int64_t>(ref.number("head_dim"));
  args.hidden_dim = static_cast<int64_t>(ref.number("hidden_dim"));
  args.vocab_size = static_cast<int64_t>(ref.number("vocab_size"));
  args.norm_eps = ref.number("norm_eps");
  args.rope_theta = ref.number("rope_theta");
  args.tie_embeddings = ref.number("tie_embeddings") != 0;
  args.max_seq_len = static_cast<int64_t>(ref.number("seq_len"));
  // The tied output is no parameter of its own: the file holds as many as the module.
  return test::with_reference_weights(build_model(args), ref, ac);
}

}  // namespace

TEST_CASE(
    "qwen3: logits, loss, every gradient and the gradient norm match the PyTorch reference's "
    "(tied, head_dim 32 beside dim / n_heads 16)",
    "[model][parity]") {
  const test::ReferenceState& ref = qwen3_reference();
  test::check_reference_gradients(ref, qwen3_reference_model(ref));
}

TEST_CASE(
    "qwen3: ten AdamW steps with warmup, decay and clipping match the reference's, with and "
    "without activation checkpointing and batch invariance",
    "[model][parity]") {
  const test::ReferenceState& ref = qwen3_reference();
  const AcMode ac = GENERATE(AcMode::kNone, AcMode::kFull);
  const bool batch_invariant = GENERATE(false, true);
  INFO("AC " << to_string(ac) << ", batch_invariant " << batch_invariant);
  test::StepTolerances tol;
  tol.grad_norm = 1e-4;
  test::check_reference_steps(ref, qwen3_reference_model(ref, ac), batch_invariant, tol);
}

namespace titan {

TEST_CASE(
    "models: the config's catalog and the registry name the same families and flavors, and "
    "every flavor offered has args",
    "[model][config]") {
  std::vector<std::string> offered_families;
  for (const FamilyCatalog& f : model_catalog()) {
    if (f.family.refused()) {
      CHECK(f.flavors.empty());
      continue;
    }
    INFO(f.family.name);
    offered_families.push_back(f.family.name);
    CHECK(offered_flavors(f) == family_flavors(f.family.name));
    for (const std::string& flavor : offered_flavors(f)) {
      INFO(flavor);
      const ModelArgs args = flavor_args(f.family.name, flavor);
      CHECK(args.family == f.family.name);
      CHECK(args.num_params() > 0);
    }
    // A refused flavor is none the family builds.
    for (const CatalogEntry& e : f.flavors) {
      if (e.refused()) CHECK_THROWS_AS(flavor_args(f.family.name, e.name), std::invalid_argument);
    }
  }
  CHECK(offered_families == model_families());
  CHECK_THROWS_WITH(flavor_args("gpt_oss", "20B"),
                    "no model family \"gpt_oss\" (registered: llama3, qwen3, deepseek_v3)");
}

}  // namespace titan

// Activation checkpointing and the recompute checker: which blocks are wrapped, bitwise-equal
// loss and gradients with and without AC (dropout included), and the checker catching what it
// should: RNG not replayed (bitwise only), a recompute that changes a shape (default), with the
// debug trace written and the divergent line marked.
#include <torch/torch.h>
#include <torch/version.h>

#include <filesystem>
#include <sstream>

#include "ac/apply.h"
#include "ac/recompute.h"
#include "ac/recompute_check.h"
#include "catch_torch.h"
#include "llama3/transformer.h"
#include "model/causal_attention.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "models/registry.h"
#include "step/step.h"
#include "test_util.h"
#include "util/error.h"
#include "util/hash.h"

using namespace titan;

namespace {

ActivationCheckpointConfig ac_config(const std::string& mode, const std::string& check = "default",
                                     bool preserve_rng = true) {
  ActivationCheckpointConfig c;
  c.mode = parse_enum<AcMode>(mode).value();
  c.determinism_check = parse_enum<RecomputeCheck>(check).value();
  c.preserve_rng_state = preserve_rng;
  return c;
}

struct LossAndGrads {
  double loss;
  std::vector<at::Tensor> grads;
  std::vector<std::string> wrapped;  // the checkpointed blocks
};

using Names = std::vector<std::string>;
const Names kAllFour = {"layers.0", "layers.1", "layers.2", "layers.3"};

// Tiny model (4 layers so selective 2 wraps some but not all), same weights and batch for every
// mode; one forward and backward in training mode.
LossAndGrads loss_and_grads(const ActivationCheckpointConfig& config, double dropout = 0.0) {
  torch::manual_seed(42);
  ModelArgs args = flavor_args("llama3", "tiny");
  args.n_layers = 4;
  args.max_seq_len = 32;
  args.dropout = dropout;
  Transformer model(args);
  model->init_weights();
  model->train();
  auto wrapped = ac::apply_activation_checkpointing(model, config).names;
  auto tokens = at::randint(0, args.vocab_size, {2, 33}, at::kLong);
  auto inputs = tokens.narrow(1, 0, 32), labels = tokens.narrow(1, 1, 32);
  auto loss = summed_cross_entropy(model->forward(inputs), labels) / 64.0;
  loss.backward();
  LossAndGrads out{loss.item<double>(), {}, wrapped};
  for (auto& p : model->parameters()) out.grads.push_back(p.grad().clone());
  return out;
}

void require_bitwise_equal(const LossAndGrads& a, const LossAndGrads& b) {
  CHECK(a.loss == b.loss);
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(at::equal(a.grads[i], b.grads[i]));
  }
}

}  // namespace

TEST_CASE("ac: torchtitan's choice of blocks: full wraps all, selective N every Nth", "[ac]") {
  CHECK(ac::checkpointed_layers(ac_config("full"), 6) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(ac::checkpointed_layers(ac_config("selective"), 6) == std::vector<int64_t>{1, 3, 5});
  auto every3 = ac_config("selective");
  every3.selective_ac_option = "3";
  CHECK(ac::checkpointed_layers(every3, 6) == std::vector<int64_t>{2, 5});
  CHECK(ac::checkpointed_layers(ac_config("none"), 6).empty());
}

TEST_CASE("ac: none, full and selective give bitwise-equal loss and gradients", "[ac]") {
  auto none = loss_and_grads(ac_config("none"));
  CHECK(none.wrapped.empty());
  SECTION("full, default check") {
    auto full = loss_and_grads(ac_config("full"));
    CHECK(full.wrapped == kAllFour);
    require_bitwise_equal(none, full);
  }
  SECTION("selective 2, bitwise check") {
    auto selective = loss_and_grads(ac_config("selective", "bitwise"));
    CHECK(selective.wrapped == Names{"layers.1", "layers.3"});
    require_bitwise_equal(none, selective);
  }
  SECTION("full, no check") {
    auto unchecked = loss_and_grads(ac_config("full", "none"));
    CHECK(unchecked.wrapped == kAllFour);
    require_bitwise_equal(none, unchecked);
  }
}

TEST_CASE(
    "ac: dropout with preserve_rng_state passes the bitwise check and matches no-AC gradients",
    "[ac]") {
  auto none = loss_and_grads(ac_config("none"), 0.1);
  auto full = loss_and_grads(ac_config("full", "bitwise", /*preserve_rng=*/true), 0.1);
  CHECK(full.wrapped == kAllFour);
  require_bitwise_equal(none, full);
}

TEST_CASE("ac: dropout without preserve_rng_state: bitwise catches it, default does not", "[ac]") {
  try {
    loss_and_grads(ac_config("full", "bitwise", /*preserve_rng=*/false), 0.1);
    FAIL("no mismatch reported");
  } catch (const ac::RecomputeMismatch& e) {
    CHECK_THAT(e.what(), Catch::Contains("block layers.3") && Catch::Contains("aten::dropout") &&
                             Catch::Contains("checksum"));
    CHECK_THAT(e.hint(), Catch::Contains("activation_checkpoint.debug"));
  }
  // The gap bitwise closes: shapes, dtypes and devices match, so the default check is silent
  // while the gradients are silently wrong.
  auto silent = loss_and_grads(ac_config("full", "default", /*preserve_rng=*/false), 0.1);
  auto right = loss_and_grads(ac_config("none"), 0.1);
  CHECK(silent.loss == right.loss);  // the forward is the same; only the recompute differs
  bool all_equal = true;
  for (size_t i = 0; i < right.grads.size(); ++i)
    all_equal = all_equal && at::equal(silent.grads[i], right.grads[i]);
  CHECK_FALSE(all_equal);
}

TEST_CASE(
    "ac: through the binary, the bitwise mismatch exits with code 3 naming step, block and op",
    "[ac][cli]") {
  auto r = test::run_titan(
      "--model.flavor tiny --model.dropout 0.1 --training.seq_len 32 --training.steps 2 "
      "--activation_checkpoint.mode full --activation_checkpoint.preserve_rng_state false "
      "--activation_checkpoint.determinism_check bitwise --debug.seed 1 --job.dump_folder " +
      test::temp_dir("ac_exit3"));
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.output, Catch::Contains("recompute mismatch at step 1, block layers.1") &&
                           Catch::Contains("aten::dropout") &&
                           Catch::Contains("activation_checkpoint.debug"));
}

TEST_CASE("ac: a recompute that changes a shape is caught by the default check, with a debug trace",
          "[ac]") {
  auto dir = test::temp_dir("ac_shape");
  auto weight = at::randn({8, 8}).requires_grad_();
  int calls = 0;
  // Test-only block: the recomputation (second call) drops the last row before the matmul.
  BlockFunction block = [&calls, weight](const at::Tensor& x) {
    auto rows = ++calls == 1 ? x.size(0) : x.size(0) - 1;
    return at::mm(x.narrow(0, 0, rows), weight).tanh();
  };
  ac::RecomputeOptions options;
  options.block_name = "layers.7";
  options.debug = true;
  options.debug_dir = dir;
  auto x = at::randn({4, 8}).requires_grad_();
  auto out = ac::run_recomputed(block, x, options);
  try {
    out.sum().backward();
    FAIL("no mismatch reported");
  } catch (const ac::RecomputeMismatch& unnamed) {
    CHECK_THAT(unnamed.what(), Catch::Contains("at block layers.7: op"));
    CHECK_FALSE(std::filesystem::exists(dir + "/step12_layers.7.txt"));  // written once named
    const ac::RecomputeMismatch e = unnamed.at_step(12);
    std::string message = e.what();
    CHECK_THAT(message,
               Catch::Contains("step 12, block layers.7") && Catch::Contains("aten::narrow"));
    CHECK_THAT(message, Catch::Contains("f32[4, 8]") && Catch::Contains("f32[3, 8]"));
    CHECK_THAT(e.hint(), Catch::Contains(dir + "/step12_layers.7.txt"));
  }
  auto trace = test::read_text(dir + "/step12_layers.7.txt");
  CHECK_THAT(trace, Catch::Contains(">> ") && Catch::Contains("= aten::narrow("));
  // The marked line is the narrow, in both traces.
  std::istringstream lines(trace);
  int marked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(">> ", 0) == 0) {
      ++marked;
      CHECK_THAT(line, Catch::Contains("aten::narrow"));
    }
  }
  CHECK(marked == 2);
}

TEST_CASE("ac: first_difference finds the first op that differs, and length differences", "[ac]") {
  ac::OpTrace a, b;
  ac::OpRecord mm;
  mm.name = "aten::mm";
  mm.outputs.push_back(ac::OutputMeta{});
  a.ops = {mm, mm};
  b.ops = {mm, mm};
  CHECK_FALSE(ac::first_difference(a, b, false).has_value());
  b.ops[1].outputs[0].sizes = {3};
  CHECK(ac::first_difference(a, b, false) == 1u);
  b.ops = {mm};
  CHECK(ac::first_difference(a, b, false) == 1u);
  b.ops = {mm, mm};
  b.ops[0].outputs[0].hashed = a.ops[0].outputs[0].hashed = true;
  b.ops[0].outputs[0].checksum = 1;
  CHECK_FALSE(ac::first_difference(a, b, false).has_value());  // default ignores values
  CHECK(ac::first_difference(a, b, true) == 0u);               // bitwise does not
}

TEST_CASE("ac: the bitwise trace hashes causal attention's output as one op", "[ac]") {
  torch::manual_seed(0);
  // (B, T, H, D) projections seen as (B, H, T, D), as the model passes them.
  auto make = [] { return at::randn({2, 40, 4, 16}).transpose(1, 2); };
  auto q = make(), k = make(), v = make();
  ac::OpTrace trace;
  trace.checksums = true;
  at::Tensor out;
  {
    ac::TraceRecorder recorder(trace);
    out = causal_attention(q, k, v);
  }
  // titan-train's own kernels record one op; libtorch 2.x's SDPA (where it is used) is ATen's.
  const bool own_kernel =
      attention_kernel_for(q.size(3), q.scalar_type(), q.device()) != AttentionKernel::kTorchSdpa;
  const std::string name =
      own_kernel ? "titan::causal_attention" : "aten::scaled_dot_product_attention";
  const ac::OpRecord* attention = nullptr;
  int64_t top_level = 0;
  for (const auto& op : trace.ops) {
    top_level += op.top_level;
    if (op.name == name) attention = &op;
  }
  REQUIRE(attention != nullptr);
  CHECK(attention->top_level);
  CHECK(top_level == 1);  // the ops inside it are reflected in its output, not hashed again
  REQUIRE(!attention->outputs.empty());
  // Only a contiguous output is hashed (the checker's rule); titan-train's kernels' is.
  CHECK(attention->outputs[0].hashed == out.is_contiguous());
  if (attention->outputs[0].hashed) CHECK(attention->outputs[0].checksum == tensor_checksum(out));
  if (own_kernel) CHECK(attention->outputs[0].hashed);
}

TEST_CASE(
    "ac: the bitwise trace hashes the fused SwiGLU's and RMSNorm's outputs as one op each and "
    "none inside them",
    "[ac]") {
  if (swiglu_kernel_for(at::kFloat, at::kCPU) == SwigluKernel::kAten)
    TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  auto a = at::randn({2, 40, 24}), b = at::randn({2, 40, 24}), weight = at::randn({24});
  ac::OpTrace trace;
  trace.checksums = true;
  at::Tensor gate, normed;
  {
    ac::TraceRecorder recorder(trace);
    gate = swiglu(a, b);
    normed = rms_norm(a, weight, 1e-5);
  }
  REQUIRE(trace.ops.size() == 2);
  CHECK(std::string(trace.ops[0].name) == "titan::swiglu");
  CHECK(std::string(trace.ops[1].name) == "titan::rms_norm");
  const at::Tensor* outputs[] = {&gate, &normed};
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(trace.ops[i].outputs.size() == 1);
    CHECK(trace.ops[i].outputs[0].hashed);
    CHECK(trace.ops[i].outputs[0].checksum == tensor_checksum(*outputs[i]));
  }
}

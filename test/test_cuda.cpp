// CUDA paths that CPU CI cannot reach: training on CUDA with bf16 autocast, the CUDA generator
// stashed and restored around an AC recomputation, and autocast re-entered by the recomputation.
// Tagged [cuda]; without a CUDA device each one skips with a visible message
// (scripts/gpu_check.sh runs them on a GPU machine).
#include <torch/cuda.h>
#include <torch/torch.h>

#include <regex>
#include <sstream>

#include "ac/recompute.h"
#include "catch_torch.h"
#include "determinism/rng_state.h"
#include "model/causal_attention.h"
#include "test_util.h"
#include "util/autocast.h"
#include "util/hash.h"

using namespace titan;

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!torch::cuda::is_available()) TITAN_SKIP("SKIPPED: no CUDA device here"); \
  } while (0)

namespace {

// Every "loss" value of a metrics.jsonl, in order.
std::vector<double> logged_losses(const std::string& jsonl) {
  std::vector<double> losses;
  std::regex loss(R"("loss": ([-+0-9.eE]+))");
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, loss)) losses.push_back(std::stod(m[1]));
  }
  return losses;
}

at::Tensor cuda_generator_state() { return generator_state(c10::Device(c10::kCUDA, 0)); }

struct DropoutRun {
  at::Tensor grad;             // of the block's weight
  at::Tensor generator_after;  // CUDA generator state after forward and backward
};

// A dropout block on CUDA, once with `ac` (checkpointed) or without; same seed, same data.
DropoutRun dropout_block(bool ac, bool preserve_rng, RecomputeCheck check) {
  torch::manual_seed(7);  // the CPU generator and every CUDA device's
  auto cuda = c10::Device(c10::kCUDA, 0);
  auto w = at::randn({64, 64}, at::TensorOptions(cuda)).requires_grad_();
  auto x = at::randn({32, 64}, at::TensorOptions(cuda)).requires_grad_();
  BlockFunction block = [w](const at::Tensor& in) { return at::dropout(at::mm(in, w), 0.5, true); };
  ac::RecomputeOptions options;
  options.block_name = "layers.0";
  options.preserve_rng_state = preserve_rng;
  options.check = check;
  auto out = ac ? ac::run_recomputed(block, x, options) : block(x);
  out.sum().backward();
  return {w.grad().clone(), cuda_generator_state()};
}

}  // namespace

TEST_CASE("cuda: the tiny model trains on CUDA with bf16 autocast and its loss falls",
          "[cuda][cli]") {
  SKIP_WITHOUT_CUDA();
  auto dir = test::temp_dir("cuda_train");
  auto r = test::run_titan(
      "--model.flavor tiny --training.device cuda --training.mixed_precision_param bfloat16 "
      "--training.steps 20 --training.seq_len 64 --training.local_batch_size 8 "
      "--optimizer.lr 3e-3 --lr_scheduler.warmup_steps 3 --metrics.log_freq 1 "
      "--activation_checkpoint.mode full --debug.seed 1 --job.dump_folder " +
      dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(test::read_text(dir + "/fingerprint.log"), Catch::Contains("cuda"));
  auto losses = logged_losses(test::read_text(dir + "/metrics.jsonl"));
  REQUIRE(losses.size() == 20);
  CHECK(losses.back() < losses.front() - 1.0);
}

TEST_CASE("cuda: AC stashes and restores the CUDA generator around the recomputation",
          "[cuda][ac]") {
  SKIP_WITHOUT_CUDA();
  auto plain = dropout_block(false, true, RecomputeCheck::kBitwise);
  // With the generator stashed, the recomputation draws the forward's dropout mask (the bitwise
  // check passes and the gradient is the one without AC), and the generator ends where the run
  // without AC leaves it.
  auto preserved = dropout_block(true, true, RecomputeCheck::kBitwise);
  CHECK(at::equal(plain.grad, preserved.grad));
  CHECK(at::equal(plain.generator_after, preserved.generator_after));
  // Without it the recomputation draws a new mask, and the bitwise check names the op.
  try {
    dropout_block(true, false, RecomputeCheck::kBitwise);
    FAIL("no mismatch reported");
  } catch (const ac::RecomputeMismatch& e) {
    CHECK_THAT(e.what(), Catch::Contains("block layers.0") && Catch::Contains("dropout"));
  }
}

TEST_CASE("cuda: bf16 autocast scope: matmuls in bf16 inside, previous state restored after",
          "[cuda]") {
  SKIP_WITHOUT_CUDA();
  auto a = at::randn({16, 16}, at::TensorOptions(c10::Device(c10::kCUDA, 0)));
  {
    AutocastScope scope(c10::kCUDA, true, at::kBFloat16);
    CHECK(at::mm(a, a).scalar_type() == at::kBFloat16);
  }
  CHECK(at::mm(a, a).scalar_type() == at::kFloat);
}

TEST_CASE("cuda: an AC block recomputes under the forward's autocast (the dtype check passes)",
          "[cuda][ac]") {
  SKIP_WITHOUT_CUDA();
  auto cuda = at::TensorOptions(c10::Device(c10::kCUDA, 0));
  auto w = at::randn({16, 16}, cuda).requires_grad_();
  auto x = at::randn({8, 16}, cuda).requires_grad_();
  ac::RecomputeOptions options;
  options.check = RecomputeCheck::kBitwise;
  at::Tensor out;
  {
    AutocastScope scope(c10::kCUDA, true, at::kBFloat16);
    out =
        ac::run_recomputed([w](const at::Tensor& in) { return at::mm(in, w).relu(); }, x, options);
  }
  CHECK(out.scalar_type() == at::kBFloat16);
  // The backward runs outside the scope: a recomputation in float32 would differ in dtype.
  CHECK_NOTHROW(out.to(at::kFloat).sum().backward());
  REQUIRE(w.grad().defined());
  CHECK(w.grad().scalar_type() == at::kFloat);
}

TEST_CASE("cuda: a CUDA tensor is hashed on the device, as words_checksum of its CPU copy",
          "[cuda]") {
  SKIP_WITHOUT_CUDA();
  auto cpu = at::randn({1000, 37});
  auto cuda = cpu.to(c10::Device(c10::kCUDA, 0));
  CHECK(tensor_checksum(cuda) == words_checksum(cpu));
  CHECK(tensor_checksum(cuda.t()) == words_checksum(cpu.t()));
}

// The first GPU run (PyTorch 2.11, H200) stopped every AC run at step 1: under the checkpointed
// forward's no-grad, SDPA ran cuDNN's kernel without the logsumexp, and the recomputation with it.
TEST_CASE("cuda: an AC block with SDPA attention recomputes the ops of its forward, in bf16",
          "[cuda][ac]") {
  SKIP_WITHOUT_CUDA();
  auto cuda = at::TensorOptions(c10::Device(c10::kCUDA, 0));
  auto w = (at::randn({16, 16}, cuda) * 0.25).requires_grad_();
  BlockFunction block = [w](const at::Tensor& in) {  // in: (B, H, T, D)
    auto q = at::matmul(in, w);
    return causal_attention(q, q * 0.5, in);
  };
  for (auto check : {RecomputeCheck::kDefault, RecomputeCheck::kBitwise}) {
    INFO("determinism_check " << (check == RecomputeCheck::kBitwise ? "bitwise" : "default"));
    auto x = at::randn({2, 4, 256, 16}, cuda).requires_grad_();
    ac::RecomputeOptions options;
    options.block_name = "layers.0";
    options.check = check;
    AutocastScope scope(c10::kCUDA, true, at::kBFloat16);
    at::Tensor out;
    REQUIRE_NOTHROW(out = ac::run_recomputed(block, x, options));
    REQUIRE_NOTHROW(out.to(at::kFloat).sum().backward());
    CHECK(x.grad().isfinite().all().item<bool>());
  }
}

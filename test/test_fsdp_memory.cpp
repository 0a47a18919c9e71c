// FSDP's memory: what the start-up check counts for a rank, and what a rank holds after a step
// (in this process, on a Gloo group of threads). A rank's peak RSS through the binary against
// replication's is a benchmark's measurement (scripts/bench_fsdp.sh), not a test's.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "config/config.h"
#include "llama3/transformer.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "step/step.h"
#include "test_ranks.h"
#include "test_util.h"
#include "train/memory_check.h"
#include "util/cpu_features.h"

namespace titan {
namespace {

TEST_CASE(
    "fsdp: the memory check counts a rank's model state as sharded: 16 B a parameter / shard "
    "degree plus the largest unit gathered, and never less than the whole weights where the "
    "run loads initial weights read whole (not a Hugging Face folder's)",
    "[config]") {
  Config config;
  const ModelArgs args = flavor_args("llama3", "8B");
  const double n = static_cast<double>(args.num_params());
  const c10::Device cpu(c10::kCPU);
  const double largest = static_cast<double>(largest_unit_params(args));
  // Llama 3 8B: the embedding (128256 x 4096) outweighs a block.
  CHECK(largest_unit_params(args) == args.vocab_size * args.dim + args.dim);
  CHECK(estimate_memory(args, config, 1, cpu).model_state == 16.0 * n);
  CHECK(estimate_memory(args, config, 1, cpu, 2).model_state == 16.0 * n / 2 + 8.0 * largest);
  // A rank builds its shards only: from 8 ranks on they are below the whole weights.
  CHECK(16.0 * n / 8 + 8.0 * largest < 4.0 * n);
  CHECK(estimate_memory(args, config, 1, cpu, 8).model_state == 16.0 * n / 8 + 8.0 * largest);
  CHECK(estimate_memory(args, config, 1, cpu, 64).model_state == 16.0 * n / 64 + 8.0 * largest);
  // A resume reads a rank's rows of shard files, and so does a Hugging Face load; other initial
  // weights are read whole first.
  Config resumes;
  resumes.checkpoint.enable = true;
  CHECK(estimate_memory(args, resumes, 1, cpu, 8).model_state == 16.0 * n / 8 + 8.0 * largest);
  Config from_hf;
  from_hf.checkpoint.initial_load_in_hf = true;
  from_hf.checkpoint.initial_load_path = "hf_folder";
  CHECK(estimate_memory(args, from_hf, 1, cpu, 8).model_state == 16.0 * n / 8 + 8.0 * largest);
  Config loading;
  loading.checkpoint.initial_load_path = "weights";
  CHECK(estimate_memory(args, loading, 1, cpu, 8).model_state == 4.0 * n);
  CHECK(estimate_memory(args, loading, 1, cpu, 2).model_state == 16.0 * n / 2 + 8.0 * largest);
}

TEST_CASE("fsdp: a tied model's largest unit counts its one table once", "[config]") {
  // Qwen3 tiny (tied): the table is 512 x 64 = 32,768 parameters; a block 49,344 (attention
  // 3 x 8,192, SwiGLU 24,576, two norms and the q/k norms 192), so the blocks are the largest
  // units. Counting the table twice would leave (131,520 - 65,536 - 64) / 2 = 32,960.
  const ModelArgs tied = flavor_args("qwen3", "tiny");
  REQUIRE(tied.num_params() == 131520);
  CHECK(largest_unit_params(tied) == 49344);
}

TEST_CASE(
    "memory: the CPU attention estimate follows the kernel: 2 floats a query row for the fused "
    "kernels, the probabilities' causal triangle for blocked ATen",
    "[config]") {
  Config config;
  config.training.seq_len = 4096;
  config.training.local_batch_size = 2;
  config.activation_checkpoint.mode = AcMode::kNone;  // every block holds its share
  const ModelArgs args = flavor_args("llama3", "debugmodel");
  const c10::Device cpu(c10::kCPU);
  const double T = 4096, heads = 2.0 * static_cast<double>(args.n_heads);
  const double layers = static_cast<double>(args.n_layers);
  if (cpu_has_avx2_fma()) {  // the fused kernels, which compute the weights again
    CHECK(estimate_memory(args, config, 1, cpu).attention == layers * heads * 8.0 * T);
  }
  set_fused_kernels(FusedKernels::kOff);
  const double without_fused = estimate_memory(args, config, 1, cpu).attention;
  set_fused_kernels(FusedKernels::kWidest);
#if TORCH_VERSION_MAJOR >= 2
  CHECK(without_fused == 0);  // scaled_dot_product_attention's flash kernel: O(T), not counted
#else
  CHECK(without_fused == layers * heads * 4.0 * T * (T + 1) / 2);
#endif
}

// The bytes of a tensor's storage (0 for a released parameter).
int64_t storage_bytes(const at::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.storage().nbytes()) : 0;
}

TEST_CASE(
    "fsdp: after a step each rank holds its shard of the parameters, gradients and AdamW "
    "moments, and no full parameter or gradient",
    "[distributed]") {
  const int64_t world = 2;
  const ModelArgs args = flavor_args("llama3", "tiny");
  int64_t full_bytes = 0;
  auto outputs = test::on_gloo_ranks(world, [&](ProcessGroup& group) -> test::RankOutputs {
    Transformer model(args);
    {
      auto generator = at::detail::createCPUGenerator(3);
      at::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.copy_(at::randn(p.sizes(), generator) * 0.02);
    }
    std::vector<at::Tensor> params = model->parameters();
    int64_t bytes = 0;
    for (const auto& p : params) bytes += storage_bytes(p);
    Config config;
    DataParallelPlan plan;
    plan.shard = world;
    plan.fsdp = true;
    auto whole = build_optimizer(params, config.optimizer);
    const auto parallel =
        make_data_parallel(DataParallelSetup{config, plan, group, model, params, *whole});
    torch::optim::AdamW& optimizer = parallel->optimizer();
    auto generator = at::detail::createCPUGenerator(7);
    Batch batch;
    batch.inputs = at::randint(args.vocab_size, {2, 16}, generator);
    batch.labels = at::randint(args.vocab_size, {2, 16}, generator);
    const std::vector<Batch> batches{batch};
    StepTarget target;
    target.model = model;
    target.params = params;
    target.optimizer = &optimizer;
    target.parallel = parallel.get();
    StepOptions options;
    options.data_parallel = world;
    StepRequest request;
    request.step = 1;
    request.batches = &batches;
    request.lr = 1e-3;
    const StepOutcome out = run_step(target, options, request);
    int64_t full_held = 0;
    for (const auto& p : params) full_held += storage_bytes(p) + storage_bytes(p.grad());
    int64_t shard_bytes = 0, grad_bytes = 0, moment_bytes = 0;
    for (const auto& shard : optimizer.param_groups().at(0).params()) {
      shard_bytes += storage_bytes(shard);
      grad_bytes += storage_bytes(shard.grad());
    }
    for (const auto& item : optimizer.state()) {
      const auto& state = static_cast<const torch::optim::AdamWParamState&>(*item.second);
      moment_bytes += storage_bytes(state.exp_avg()) + storage_bytes(state.exp_avg_sq());
    }
    if (group.rank() == 0) full_bytes = bytes;
    return {at::tensor({full_held, shard_bytes, grad_bytes, moment_bytes}),
            at::tensor(out.loss, at::kDouble)};
  });
  // The tiny model's rows divide by 2: a shard is exactly half, with no padding.
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r);
    const auto held = outputs[r][0];
    CHECK(held[0].item<int64_t>() == 0);               // no full parameter or gradient left
    CHECK(held[1].item<int64_t>() == full_bytes / 2);  // parameters
    CHECK(held[2].item<int64_t>() == full_bytes / 2);  // gradients
    CHECK(held[3].item<int64_t>() == full_bytes);      // two moments
    CHECK(std::isfinite(outputs[r][1].item<double>()));
  }
}

}  // namespace
}  // namespace titan

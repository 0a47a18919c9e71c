// FSDP's memory: what the start-up check counts for a rank, what a rank holds after a step (in
// this process, on a Gloo group of threads), and a rank's peak RSS through the binary against
// replication's.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "config/config.h"
#include "model/llama.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "step/step.h"
#include "test_ranks.h"
#include "test_util.h"
#include "train/memory_check.h"
#include "util/cpu_features.h"

namespace titan {
namespace {

// A run of debugmodel_wide (107M parameters, where the model state outweighs the activations)
// over `world` ranks, `extra` picking FSDP or replication: rank 0's peak resident memory at the
// end (metrics.jsonl's last memory_gib: ru_maxrss on the CPU) and each rank's peak up to its
// first step (the start-up line "rss before the first step"), in bytes.
struct RanksMemory {
  double end_peak = -1;
  std::vector<double> start_peaks;
};
RanksMemory memory_of_ranks(const std::string& dir, int world, const std::string& extra) {
  std::filesystem::create_directories(dir + "_out");
  const std::string flags =
      "--model.flavor debugmodel_wide --training.seq_len 64 --training.local_batch_size 1 "
      "--training.steps 2 --metrics.log_freq 1 --training.device cpu "
      "--activation_checkpoint.mode none --debug.seed 1 --job.dump_folder " +
      dir + extra;
  setenv("LOG_RANK", "0,1,2,3", 1);  // every rank's start-up lines
  const auto ranks = test::run_ranks(dir + "_out", test::same_args(world, flags));
  unsetenv("LOG_RANK");
  RanksMemory memory;
  const std::regex start_line(
      R"(rss before the first step: [.0-9]+ GiB \(peak so far ([.0-9]+) GiB\))");
  for (const auto& rank : ranks) {
    INFO(rank.output);
    REQUIRE(rank.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(rank.output, m, start_line));
    memory.start_peaks.push_back(std::stod(m[1]) * (1 << 30));
  }
  std::istringstream jsonl(test::read_text(dir + "/metrics.jsonl"));
  const std::regex field(R"("memory_gib": ([.e+\-0-9]+))");
  std::smatch m;
  for (std::string line; std::getline(jsonl, line);) {
    if (std::regex_search(line, m, field)) memory.end_peak = std::stod(m[1]) * (1 << 30);
  }
  REQUIRE(memory.end_peak > 0);
  return memory;
}

TEST_CASE(
    "fsdp: the memory check counts a rank's model state as sharded: 16 B a parameter / shard "
    "degree plus the largest unit gathered, and never less than the whole weights where the "
    "run loads initial weights read whole (not a Hugging Face folder's)",
    "[config]") {
  Config config;
  const ModelArgs args = model_args_for_flavor(Flavor::k8B);
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

TEST_CASE(
    "memory: the CPU attention estimate follows the kernel: 2 floats a query row for the fused "
    "kernels, the probabilities' causal triangle for blocked ATen",
    "[config]") {
  Config config;
  config.training.seq_len = 4096;
  config.training.local_batch_size = 2;
  config.activation_checkpoint.mode = AcMode::kNone;  // every block holds its share
  const ModelArgs args = model_args_for_flavor(Flavor::kDebugModel);
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
  const ModelArgs args = model_args_for_flavor(Flavor::kTiny);
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

// What sharding over `shards` ranks removes from a rank's peak: (1 - 1/shards) of the 16 B a
// parameter (weights, gradient, two AdamW moments), less what a rank holds of a unit gathered
// whole. In a block's backward a rank holds that block's weights and full gradients, the
// gradients packed for the reduce-scatter and the previous block's weights prefetched: 4 x 4 B a
// parameter of a unit. (The memory check counts one unit's weights and gradients: its figure is
// a lower bound.) The measured peak varies by about 3 units' weights (12 B a parameter of a unit)
// from run to run, with when the threads' allocations meet. Under batch_invariant a rank holds
// its full gradients (its node of the sequences' tree) until the rank-ordered sum sends each
// rank its rows, a unit at a time: the same 16 B a parameter of a unit bound it.
double sharding_share(const ModelArgs& args, int shards) {
  const double n = static_cast<double>(args.num_params());
  const double unit = static_cast<double>(largest_unit_params(args));  // a block here
  return 16.0 * n * (1.0 - 1.0 / shards) - 16.0 * unit - 12.0 * unit;
}

TEST_CASE(
    "fsdp: through the binary, a rank's peak RSS is below replication's: up to the first step by "
    "35% of the weights over 2 ranks and 60% over 4 (no rank builds the whole model), and at the "
    "end by what sharding the model state removes, less two units gathered whole, with and "
    "without batch_invariant (there by at least 0.5 GB over 2 ranks)",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_rss");
  const std::string invariant = " --debug.batch_invariant";
  const RanksMemory replicated = memory_of_ranks(dir + "/replicated", 2, test::kReplicate);
  const RanksMemory fsdp4 = memory_of_ranks(dir + "/fsdp4", 4, "");
  const RanksMemory replicated_bi =
      memory_of_ranks(dir + "/replicated_bi", 2, invariant + test::kReplicate);
  const RanksMemory fsdp_bi = memory_of_ranks(dir + "/fsdp_bi", 2, invariant);
  const ModelArgs args = model_args_for_flavor(Flavor::kDebugModelWide);
  // Up to the first step a replica holds the whole weights (4 B a parameter; the AdamW moments
  // come with the first step); a shard its rows of them, plus one parameter drawn whole at a
  // time by the initialization. batch_invariant changes nothing before the first step.
  const double weights = 4.0 * static_cast<double>(args.num_params());
  const double replicated_start = replicated.start_peaks.at(0);
  for (size_t r = 0; r < fsdp_bi.start_peaks.size(); ++r) {
    INFO("rank " << r << " of 2: replicated " << replicated_start / (1 << 20) << " MiB, FSDP "
                 << fsdp_bi.start_peaks[r] / (1 << 20) << " MiB, weights " << weights / (1 << 20)
                 << " MiB");
    CHECK(replicated_start - fsdp_bi.start_peaks[r] >= 0.35 * weights);
  }
  for (size_t r = 0; r < fsdp4.start_peaks.size(); ++r) {
    INFO("rank " << r << " of 4: replicated " << replicated_start / (1 << 20) << " MiB, FSDP "
                 << fsdp4.start_peaks[r] / (1 << 20) << " MiB");
    CHECK(replicated_start - fsdp4.start_peaks[r] >= 0.60 * weights);
  }
  INFO("replicated " << replicated.end_peak / (1 << 20) << " MiB, FSDP over 4 "
                     << fsdp4.end_peak / (1 << 20) << " MiB, the share "
                     << sharding_share(args, 4) / (1 << 20) << " MiB");
  CHECK(replicated.end_peak - fsdp4.end_peak >= sharding_share(args, 4));
  INFO("batch_invariant: replicated " << replicated_bi.end_peak / (1 << 20) << " MiB, FSDP over 2 "
                                      << fsdp_bi.end_peak / (1 << 20) << " MiB, the share "
                                      << sharding_share(args, 2) / (1 << 20) << " MiB");
  CHECK(sharding_share(args, 2) > 450.0 * (1 << 20));
  CHECK(replicated_bi.end_peak - fsdp_bi.end_peak >= sharding_share(args, 2));
  CHECK(replicated_bi.end_peak - fsdp_bi.end_peak >= 0.5e9);
}

}  // namespace
}  // namespace titan

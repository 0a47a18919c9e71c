// FSDP (parallelism.data_parallel_shard_degree > 1): through the binary with 2 and 4 ranks on
// loopback against replication and one process, and in this process on a Gloo group of threads
// for what a rank holds.
#include <ATen/CPUGeneratorImpl.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/fingerprint_reader.h"
#include "catch_torch.h"
#include "config/config.h"
#include "llama3/transformer.h"
#include "models/registry.h"
#include "parallel/data_parallel_plan.h"
#include "parallel/fully_sharded_model.h"
#include "parallel/split_checksum.h"
#include "test_ranks.h"
#include "test_util.h"
#include "util/hash.h"

namespace titan {
namespace {

using test::fingerprint_step_lines;
using test::kHsdp;
using test::kReplicate;
using test::run_ranks;
using test::same_args;
using test::tokens_dataset;
using test::train_ranks;

int64_t count_lines(const std::string& lines) {
  return std::count(lines.begin(), lines.end(), '\n');
}

TEST_CASE(
    "fsdp: under batch_invariant, 2 and 4 ranks' step lines, and HSDP's over 2 x 2, are "
    "byte-identical to replication's and one process's, with activation checkpointing and "
    "micro-batches",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_bitwise");
  const std::string args = tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 16"
                           " --activation_checkpoint.mode full";
  const auto one = test::run_titan(test::tiny_run(dir + "/one", 4, args));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const auto expected = fingerprint_step_lines(dir + "/one/fingerprint.log");
  REQUIRE(count_lines(expected) == 4);
  for (int world : {2, 4}) {
    INFO(world << " ranks");
    const std::string fsdp = "fsdp" + std::to_string(world);
    const std::string log = train_ranks(dir, fsdp, world, args);
    CHECK_THAT(log, Catch::Contains("FSDP: parameters, gradients and AdamW state sharded"));
    CHECK(fingerprint_step_lines(dir + "/" + fsdp + "/fingerprint.log") == expected);
    // Every rank checksums the same gathered parameters.
    CHECK(fingerprint_step_lines(dir + "/" + fsdp + "/fingerprint.rank1.log") == expected);
  }
  // Prefetching moves when the all-gathers run, not what they move.
  setenv("TITAN_FSDP_PREFETCH", "0", 1);
  const std::string unfetched = train_ranks(dir, "no_prefetch", 2, args);
  unsetenv("TITAN_FSDP_PREFETCH");
  CHECK_THAT(unfetched, Catch::Contains("(no prefetch)"));
  CHECK(fingerprint_step_lines(dir + "/no_prefetch/fingerprint.log") == expected);
  std::string log = train_ranks(dir, "hsdp", 4, args + kHsdp);
  CHECK_THAT(log, Catch::Contains("(replicate 2, shard 2): HSDP: 2 replicas of 2 shards"));
  CHECK(fingerprint_step_lines(dir + "/hsdp/fingerprint.log") == expected);
  // A rank of the other shard group checksums its own group's shards.
  CHECK(fingerprint_step_lines(dir + "/hsdp/fingerprint.rank3.log") == expected);
  log = train_ranks(dir, "replicated", 2, args + kReplicate);
  CHECK_THAT(log, Catch::Contains("replicate 2, shard 1): replication"));
  CHECK(fingerprint_step_lines(dir + "/replicated/fingerprint.log") == expected);
}

TEST_CASE(
    "fsdp: without batch_invariant each step's loss and grad_norm are within 1e-6 of "
    "replication's, for each fsdp_reshard_after_forward, and for HSDP",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_close");
  const std::string args = tokens_dataset(dir) + " --training.global_batch_size 16";
  struct Case {
    int world;
    const char* reshard;
    const char* ac;
    const char* mesh;
  };
  // Replication's steps, once a world size: AC recomputes the forward's bits (tested bitwise
  // elsewhere), so one replicated run without AC serves every AC mode.
  for (const int world : {2, 4}) {
    train_ranks(dir, "replicated" + std::to_string(world), world,
                args + " --activation_checkpoint.mode none" + kReplicate);
  }
  for (const Case& c : {Case{2, "default", "selective", ""}, Case{2, "never", "none", ""},
                        Case{4, "always", "full", ""}, Case{4, "default", "none", kHsdp}}) {
    INFO(c.world << " ranks, reshard " << c.reshard << ", AC " << c.ac << c.mesh);
    const std::string run_args = args + " --activation_checkpoint.mode " + c.ac +
                                 " --parallelism.fsdp_reshard_after_forward " + c.reshard;
    const std::string tag = std::to_string(c.world) + c.reshard + (*c.mesh ? "hsdp" : "");
    const std::string log = train_ranks(dir, "fsdp" + tag, c.world, run_args + c.mesh);
    CHECK_THAT(log, Catch::Contains(std::string("reshard_after_forward ") + c.reshard));
    if (*c.mesh) CHECK_THAT(log, Catch::Contains("then summed over the replicas"));
    const auto a = read_fingerprint_log(dir + "/fsdp" + tag + "/fingerprint.log").steps;
    const auto b =
        read_fingerprint_log(dir + "/replicated" + std::to_string(c.world) + "/fingerprint.log")
            .steps;
    REQUIRE(a.size() == 4);
    REQUIRE(b.size() == 4);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("step " << i + 1);
      CHECK(std::abs(a[i].loss - b[i].loss) <= 1e-6 * std::abs(b[i].loss));
      CHECK(std::abs(a[i].grad_norm - b[i].grad_norm) <= 1e-6 * std::abs(b[i].grad_norm));
    }
    CHECK(a.back().loss < a.front().loss + 1.0);  // it trains, not diverges
  }
}

TEST_CASE(
    "fsdp: under batch_invariant, the op-level numerics trace and a rerun (skip) of a step are "
    "byte-identical to replication's: numerics.log, the rerun report and the step lines",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_rerun");
  const std::string args = tokens_dataset(dir) +
                           " --debug.batch_invariant true --debug.numerics_trace ops"
                           " --debug.rerun_steps 2 --debug.rerun_action skip";
  const std::string fsdp = train_ranks(dir, "fsdp", 2, args);
  CHECK_THAT(fsdp, Catch::Contains("shard 2): FSDP"));
  CHECK_THAT(fsdp, Catch::Contains("rerun check: step 2 (requested): reproducible"));
  train_ranks(dir, "replicated", 2, args + kReplicate);
  for (const char* file :
       {"/numerics.log", "/numerics.rank1.log", "/rerun/step2.txt", "/rerun/step2.rank1.txt"}) {
    INFO(file);
    const std::string replicated = test::read_text(dir + "/replicated" + file);
    CHECK_FALSE(replicated.empty());
    CHECK(test::read_text(dir + "/fsdp" + file) == replicated);
  }
  CHECK(fingerprint_step_lines(dir + "/fsdp/fingerprint.log") ==
        fingerprint_step_lines(dir + "/replicated/fingerprint.log"));
}

// Checks that runs `a` and `b` (folders) logged `steps` steps each, every loss within 1e-3 and
// grad_norm within 1e-2 of b's (bfloat16 keeps 8 bits of mantissa: a summed or gathered value is
// off by up to 2^-8 relative), and returns whether any loss and any grad_norm differ at all.
struct Parted {
  bool loss = false, grad_norm = false;
};
Parted check_bf16_close(const std::string& a_dir, const std::string& b_dir, size_t steps) {
  const auto a = read_fingerprint_log(a_dir + "/fingerprint.log").steps;
  const auto b = read_fingerprint_log(b_dir + "/fingerprint.log").steps;
  REQUIRE(a.size() == steps);
  REQUIRE(b.size() == steps);
  Parted parted;
  for (size_t i = 0; i < steps; ++i) {
    INFO("step " << i + 1);
    CHECK(std::abs(a[i].loss - b[i].loss) <= 1e-3 * std::abs(b[i].loss));
    CHECK(std::abs(a[i].grad_norm - b[i].grad_norm) <= 1e-2 * std::abs(b[i].grad_norm));
    parted.loss = parted.loss || a[i].loss != b[i].loss;
    parted.grad_norm = parted.grad_norm || a[i].grad_norm != b[i].grad_norm;
  }
  return parted;
}

TEST_CASE(
    "fsdp: training.mixed_precision_reduce = bfloat16 reduce-scatters in bfloat16 (and sums over "
    "HSDP's replicas): close to float32's steps but not their bits, and batch_invariant refuses it",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_bf16_reduce");
  const std::string args = tokens_dataset(dir) + " --training.global_batch_size 16";
  const std::string bf16 = " --training.mixed_precision_reduce bfloat16";
  struct Case {
    int world;
    const char* mesh;
  };
  for (const Case& c : {Case{2, ""}, Case{4, kHsdp}}) {
    INFO(c.world << " ranks" << c.mesh);
    const std::string tag = std::to_string(c.world);
    const std::string log = train_ranks(dir, "bf16_" + tag, c.world, args + c.mesh + bf16);
    CHECK_THAT(log, Catch::Contains("gradients reduce-scattered in bfloat16"));
    train_ranks(dir, "f32_" + tag, c.world, args + c.mesh);
    const auto parted = check_bf16_close(dir + "/bf16_" + tag, dir + "/f32_" + tag, 4);
    CHECK(parted.grad_norm);
  }
  const auto refused =
      test::run_titan(test::tiny_run(dir + "/refused", 2, "--debug.batch_invariant true" + bf16));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("debug.batch_invariant with "
                                             "training.mixed_precision_reduce"));
}

TEST_CASE(
    "fsdp: under bfloat16 autocast (mixed_precision_param) the units are all-gathered in "
    "bfloat16: close to replication's steps but not their bits, and the final model-only save "
    "still holds the exact float32 weights",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_bf16_param");
  const std::string args = tokens_dataset(dir) +
                           " --training.global_batch_size 8 --training.mixed_precision_param "
                           "bfloat16 --checkpoint.enable true --checkpoint.interval 3";
  const std::string log = train_ranks(dir, "fsdp", 2, args, 3);
  CHECK_THAT(log, Catch::Contains("gathered in bfloat16"));
  train_ranks(dir, "replicated", 2, args + kReplicate, 3);
  CHECK(check_bf16_close(dir + "/fsdp", dir + "/replicated", 3).loss);
  // The same run saving a full (sharded) checkpoint at step 3: exported, the model-only save's
  // bytes.
  train_ranks(dir, "full", 2, args + " --checkpoint.last_save_model_only false", 3);
  const auto r =
      test::run_titan("export " + dir + "/full/checkpoint/step-3 -o " + dir + "/full.safetensors");
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_text(dir + "/fsdp/checkpoint/step-3/model.safetensors") ==
        test::read_text(dir + "/full.safetensors"));
}

TEST_CASE(
    "fsdp: a checkpoint saved at one shard degree resumes bit-exactly at another, on replication "
    "on HSDP, on replication and on one process (batch_invariant): 2 -> 4 -> HSDP 2 x 2 -> "
    "replicated 2 -> 1",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_resume");
  const std::string args = tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 8"
                           " --checkpoint.enable true --checkpoint.interval 1"
                           " --checkpoint.last_save_model_only false";
  auto run = [&](const std::string& name, int world, const std::string& extra) {
    return train_ranks(dir, name, world, args + extra, 6);
  };
  run("straight", 1, "");
  const std::string checkpoints = dir + "/split/checkpoint/";
  CHECK_THAT(run("split", 2, ""), Catch::Contains("FSDP: parameters"));
  // As if each run had been killed after the step it is resumed from.
  const auto drop_after = [&](int step) {
    for (int s = step + 1; s <= 6; ++s)
      std::filesystem::remove_all(checkpoints + "step-" + std::to_string(s));
  };
  drop_after(2);
  std::string log = run("split", 4, "");
  CHECK_THAT(log, Catch::Contains("resumed from " + checkpoints + "step-2"));
  CHECK_THAT(log, Catch::Contains("shard 4): FSDP"));
  drop_after(3);
  log = run("split", 4, kHsdp);
  CHECK_THAT(log, Catch::Contains("resumed from " + checkpoints + "step-3"));
  CHECK_THAT(log, Catch::Contains("HSDP: 2 replicas of 2 shards"));
  drop_after(4);
  log = run("split", 2, kReplicate);
  CHECK_THAT(log, Catch::Contains("resumed from " + checkpoints + "step-4"));
  CHECK_THAT(log, Catch::Contains("): replication"));
  drop_after(5);
  log = run("split", 1, "");
  CHECK_THAT(log, Catch::Contains("resumed from " + checkpoints + "step-5"));
  const auto expected = fingerprint_step_lines(dir + "/straight/fingerprint.log");
  REQUIRE(count_lines(expected) == 6);
  CHECK(fingerprint_step_lines(dir + "/split/fingerprint.log") == expected);
}

TEST_CASE(
    "fsdp: the shard degree replicates where the run reads the whole model between steps, "
    "naming why, and a replicate degree beside it is HSDP",
    "[config]") {
  Config config;
  DataParallelPlan plan = data_parallel_plan(config, 4);  // shard -1 fills the world
  CHECK(plan.fsdp);
  CHECK(plan.shard == 4);
  CHECK(plan.replicate == 1);
  CHECK_FALSE(data_parallel_plan(config, 1).fsdp);

  config.parallelism.data_parallel_replicate_degree = 2;
  plan = data_parallel_plan(config, 4);
  CHECK(plan.fsdp);
  CHECK(plan.hsdp());
  CHECK(plan.shard == 2);
  CHECK(plan.replicated_because.empty());
  config.parallelism.data_parallel_shard_degree = 1;
  config.parallelism.data_parallel_replicate_degree = -1;
  CHECK_FALSE(data_parallel_plan(config, 4).hsdp());

  config = Config();
  config.checkpoint.enable = true;  // each rank saves its shards
  CHECK(data_parallel_plan(config, 2).fsdp);
  // The rerun check and the numerics trace read the shards (tested through the binary below).
  config = Config();
  config.debug.rerun_steps = {3};
  config.debug.numerics_trace = NumericsTrace::kOps;
  CHECK(data_parallel_plan(config, 2).fsdp);
  config = Config();
  config.metrics.enable_tensorboard = true;
  config.metrics.histogram_freq = 5;
  CHECK_THAT(data_parallel_plan(config, 2).replicated_because,
             Catch::Contains("metrics.histogram_freq"));
}

TEST_CASE(
    "fsdp: the params checksum from the shards is the whole model's tensors_checksum, hashed in "
    "chunks where each rank's rows are whole chunks and exchanged whole where not",
    "[distributed]") {
  ModelArgs args = flavor_args("llama3", "tiny");
  // An 8 MiB embedding and output (4096 x 512 float32): at 2 and 4 ranks each rank holds whole
  // 1 MiB chunks of them (hashed where they lie), at 3 ranks not (exchanged); the block's
  // weights are under a chunk (exchanged).
  args.dim = 512;
  args.vocab_size = 4096;
  args.n_layers = 1;
  args.n_heads = 8;
  args.n_kv_heads = 8;
  for (int64_t world : {2, 3, 4}) {
    INFO(world << " ranks");
    auto outputs = test::on_gloo_ranks(world, [&](ProcessGroup& group) -> test::RankOutputs {
      Transformer model(args);
      auto generator = at::detail::createCPUGenerator(9);
      {
        at::NoGradGuard no_grad;
        for (auto& p : model->parameters()) p.copy_(at::randn(p.sizes(), generator));
      }
      const uint64_t whole = tensors_checksum(model->parameters());
      FullyShardedModel sharded(model, group, ReshardAfterForward::kDefault);
      const uint64_t from_shards = sharded.params_checksum();
      return {at::tensor({static_cast<int64_t>(whole), static_cast<int64_t>(from_shards)})};
    });
    for (int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      CHECK(outputs[r][0][0].item<int64_t>() == outputs[r][0][1].item<int64_t>());
    }
  }
}

TEST_CASE(
    "fsdp: split_tensors_checksum of ranges in rank order is tensors_checksum of the whole "
    "tensors, for chunk-sized, shorter, longer and empty ranges",
    "[distributed]") {
  const int64_t k = static_cast<int64_t>(kHashChunkBytes);
  // Each tensor's byte size and where ranks 1 and 2 of 3 start: ranges inside one chunk,
  // ranges spanning chunk boundaries, whole chunks, an empty range, a tensor of one chunk.
  struct Split {
    int64_t total, second, third;
  };
  const std::vector<Split> splits = {
      {k - 1, 100, 200},     {k, k / 2, k}, {k + 1, k, k + 1},    {3 * k + 5, k / 3, 2 * k + 7},
      {4 * k, 2 * k, 3 * k}, {5, 5, 5},     {2 * k + 9, 0, 2 * k}};
  std::vector<at::Tensor> whole;
  auto generator = at::detail::createCPUGenerator(4);
  for (const auto& s : splits)
    whole.push_back(at::randint(256, {s.total}, generator).to(at::kByte));
  auto outputs = test::on_gloo_ranks(3, [&](ProcessGroup& group) -> test::RankOutputs {
    std::vector<BytesRange> ranges;
    for (size_t i = 0; i < splits.size(); ++i) {
      const int64_t starts[] = {0, splits[i].second, splits[i].third, splits[i].total};
      BytesRange range;
      range.total = splits[i].total;
      range.begin = starts[group.rank()];
      range.bytes = whole[i].narrow(0, range.begin, starts[group.rank() + 1] - range.begin);
      for (int r = 0; r < 3; ++r)
        range.largest = std::max(range.largest, starts[r + 1] - starts[r]);
      ranges.push_back(std::move(range));
    }
    return {at::tensor(static_cast<int64_t>(split_tensors_checksum(group, ranges)))};
  });
  const auto expected = static_cast<int64_t>(tensors_checksum(whole));
  for (int r = 0; r < 3; ++r) CHECK(outputs[r][0].item<int64_t>() == expected);
}

}  // namespace
}  // namespace titan

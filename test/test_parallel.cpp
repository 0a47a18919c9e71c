// The parallel component (lib/parallel/data_parallel.h) through its interface: the same step on
// replication and on full sharding over Gloo ranks in this process.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "config/config.h"
#include "distributed/shard_layout.h"
#include "llama3/transformer.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "step/step.h"
#include "test_ranks.h"
#include "util/blas_threads.h"

namespace titan {
namespace {

// One batch-invariant train step of the tiny model (the same weights on every rank, each rank its
// own batch) on replication or (`fsdp`) full sharding; returns the parameters' checksum after it
// (as its two 32-bit halves), the gradient norm, the number of this rank's pieces, their elements
// and whether they are split over a group of every rank.
test::RankOutputs step_on(ProcessGroup& group, bool fsdp) {
  const ModelArgs args = flavor_args("llama3", "tiny");
  Transformer model(args);
  {
    auto generator = at::detail::createCPUGenerator(3);
    at::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.copy_(at::randn(p.sizes(), generator) * 0.02);
  }
  Config config;
  config.debug.batch_invariant = true;
  DataParallelPlan plan;
  plan.shard = fsdp ? group.size() : 1;
  plan.replicate = fsdp ? 1 : group.size();
  plan.fsdp = fsdp;
  std::vector<at::Tensor> params = model->parameters();
  auto whole = build_optimizer(params, config.optimizer);
  const auto parallel =
      make_data_parallel(DataParallelSetup{config, plan, group, model, params, *whole});
  auto generator = at::detail::createCPUGenerator(100 + group.rank());
  Batch batch;
  batch.inputs = at::randint(args.vocab_size, {2, 16}, generator);
  batch.labels = at::randint(args.vocab_size, {2, 16}, generator);
  const std::vector<Batch> batches{batch};
  StepTarget target;
  target.model = model;
  target.params = params;
  target.optimizer = &parallel->optimizer();
  target.parallel = parallel.get();
  StepOptions options;
  options.data_parallel = group.size();
  options.batch_invariant = true;
  options.max_norm = 1e-3;  // clipped: the coefficient is part of what must agree
  StepRequest request;
  request.step = 1;
  request.batches = &batches;
  request.lr = 1e-2;
  const StepOutcome out = run_step(target, options, request);
  const uint64_t checksum = parallel->params_checksum();
  int64_t elements = 0;
  const auto pieces = parallel->local_pieces();
  for (const auto& piece : pieces) elements += piece.value.numel();
  ProcessGroup* split = parallel->pieces_split_over();
  return {at::tensor(
              {static_cast<int64_t>(checksum >> 32), static_cast<int64_t>(checksum & 0xffffffffu),
               static_cast<int64_t>(pieces.size()), elements, split ? split->size() : int64_t{0}}),
          at::tensor(out.grad_norm, at::kDouble)};
}

TEST_CASE(
    "parallel: a batch-invariant step through the DataParallel interface leaves the same "
    "parameters and grad_norm on replication and full sharding, whose pieces are "
    "this rank's half, split over both ranks",
    "[distributed]") {
  const int64_t world = 2;
  // As a batch-invariant run does (determinism controller): BLAS and ATen on one thread, so that
  // OpenBLAS's split of a GEMM cannot depend on the two ranks' threads calling it at once.
  const int threads_before = at::get_num_threads(), blas_before = blas_threads();
  at::set_num_threads(1);
  set_blas_threads(1);
  const auto replicated =
      test::on_gloo_ranks(world, [](ProcessGroup& g) { return step_on(g, false); });
  const auto sharded = test::on_gloo_ranks(world, [](ProcessGroup& g) { return step_on(g, true); });
  at::set_num_threads(threads_before);
  set_blas_threads(blas_before);
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r);
    const auto rep = replicated[r][0], fs = sharded[r][0];
    CHECK(rep[0].item<int64_t>() == fs[0].item<int64_t>());  // params checksum, bit for bit
    CHECK(rep[1].item<int64_t>() == fs[1].item<int64_t>());
    CHECK(replicated[r][1].item<double>() == sharded[r][1].item<double>());  // grad_norm
    CHECK(rep[2].item<int64_t>() == fs[2].item<int64_t>());  // a piece of every parameter
    // Whole parameters, and half of them: the tiny model's rows divide by 2, with no padding.
    CHECK(fs[3].item<int64_t>() * world == rep[3].item<int64_t>());
    CHECK(rep[4].item<int64_t>() == 0);  // not split
    CHECK(fs[4].item<int64_t>() == world);
  }
  // The two ranks agree with each other too (the same model after the step).
  CHECK(replicated[0][0][0].item<int64_t>() == replicated[1][0][0].item<int64_t>());
}

TEST_CASE(
    "parallel: under FSDP a rank builds the model shape only and keeps its rows of torchtitan's "
    "init, bit for bit the rows of the whole model's, over 2 ranks and over 3 (rows that do not "
    "divide), no rank holding a whole parameter, and loaded rows land in the shards",
    "[distributed]") {
  const ModelArgs args = flavor_args("llama3", "tiny");
  const uint64_t seed = 5;
  std::vector<at::Tensor> whole;
  {
    at::manual_seed(seed);  // as a run's determinism controller seeds, before the model
    Transformer reference(args);
    reference->init_weights();
    for (const auto& p : reference->parameters()) whole.push_back(p.detach().clone());
  }
  for (const int64_t world : {2, 3}) {
    std::mutex generator;  // the ranks' threads draw from one default generator in turn
    const auto outputs = test::on_gloo_ranks(world, [&](ProcessGroup& group) -> test::RankOutputs {
      Config config;
      DataParallelPlan plan;
      plan.shard = world;
      plan.fsdp = true;
      std::unique_lock<std::mutex> draws(generator);
      at::manual_seed(seed);
      Transformer model(args, plan.param_memory(c10::Device(c10::kCPU)));
      std::vector<at::Tensor> params = model->parameters();
      auto whole_optimizer = build_optimizer(params, config.optimizer);
      const auto parallel = make_data_parallel(
          DataParallelSetup{config, plan, group, model, params, *whole_optimizer});
      model->init_weights([&](const std::string& name, const at::Tensor& values) {
        parallel->load_rows(name, 0, values);
      });
      draws.unlock();
      int64_t held = 0;
      for (const auto& p : params) held += static_cast<int64_t>(p.storage().nbytes());
      test::RankOutputs out{at::tensor(held)};
      for (const auto& piece : parallel->local_pieces()) out.push_back(piece.value.clone());
      // Rows 1..2 of the output weight loaded as a checkpoint's would be: each rank keeps its own.
      const at::Tensor loaded = at::full({2, args.dim}, 7.0f);
      parallel->load_rows("output.weight", 1, loaded);
      const auto pieces = parallel->local_pieces();
      out.push_back(pieces.back().value.clone());
      bool refused = false;  // rows past the parameter's end
      try {
        parallel->load_rows("output.weight", args.vocab_size - 1, loaded);
      } catch (const std::invalid_argument& e) {
        refused = std::string(e.what()).find("do not fit output.weight") != std::string::npos;
      }
      out.push_back(at::tensor(int64_t{refused}));
      return out;
    });
    for (int64_t r = 0; r < world; ++r) {
      INFO("rank " << r << " of " << world);
      CHECK(outputs[r][0].item<int64_t>() == 0);
      REQUIRE(outputs[r].size() == whole.size() + 3);
      CHECK(outputs[r].back().item<int64_t>() == 1);
      for (size_t k = 0; k < whole.size(); ++k) {
        const RowRange rows = fsdp_rows(whole[k].size(0), r, world);
        CHECK(at::equal(outputs[r][k + 1], whole[k].narrow(0, rows.begin, rows.end - rows.begin)));
      }
      at::Tensor expected = whole.back().clone();
      expected.narrow(0, 1, 2).fill_(7.0f);
      const RowRange rows = fsdp_rows(expected.size(0), r, world);
      CHECK(at::equal(outputs[r][whole.size() + 1],
                      expected.narrow(0, rows.begin, rows.end - rows.begin)));
    }
  }
}

}  // namespace
}  // namespace titan

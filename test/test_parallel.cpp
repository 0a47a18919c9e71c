// The parallel component (lib/parallel/data_parallel.h) through its interface: the same step on
// replication and on full sharding over Gloo ranks in this process.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "catch_torch.h"
#include "config/config.h"
#include "model/llama.h"
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
  const ModelArgs args = model_args_for_flavor(Flavor::kTiny);
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

}  // namespace
}  // namespace titan

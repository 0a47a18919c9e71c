// Contract in full_sharding.h.
#include "parallel/full_sharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "optim/optimizer.h"
#include "parallel/sharded_sums.h"
#include "util/env_switch.h"
#include "util/malloc_tuning.h"

namespace titan {

FullSharding::FullSharding(const DataParallelSetup& setup)
    : world_(setup.world),
      plan_(setup.plan),
      reshard_after_forward_(setup.config.parallelism.fsdp_reshard_after_forward),
      params_(setup.params),
      whole_optimizer_(setup.whole_optimizer),
      batch_invariant_(setup.config.debug.batch_invariant) {
  const Config& config = setup.config;
  // TITAN_FSDP_PREFETCH=0 turns prefetching off, to measure what it hides (bench_fsdp.sh).
  if (plan_.hsdp()) mesh_ = make_hsdp_mesh(world_, plan_.replicate, plan_.shard);
  sharded_ = std::make_unique<FullyShardedModel>(setup.model, mesh_.shard ? *mesh_.shard : world_,
                                                 reshard_after_forward_of(reshard_after_forward_),
                                                 env_switch(EnvSwitch::kFsdpPrefetch) == "1",
                                                 mesh_.replica.get());
  if (config.training.mixed_precision_reduce == "bfloat16")
    sharded_->set_reduce_dtype(at::kBFloat16);
  // Under bf16 autocast the units are gathered in bfloat16 (FSDP's param_dtype); a
  // batch-invariant run gathers them exact, as replication computes from float32 weights.
  if (setup.autocast_bf16 && !batch_invariant_) sharded_->set_param_dtype(at::kBFloat16);
  // batch_invariant sums each rank's whole node of the sequences' pairwise tree, after the
  // backward, in rank order; otherwise the backward reduce-scatters.
  sharded_->set_reduce_in_backward(!batch_invariant_);
  shard_optimizer_ = build_optimizer(sharded_->shards(), config.optimizer);
  return_free_heap_to_kernel();  // a whole model built with memory (a test's) is freed
}

void FullSharding::sum_over_ranks(at::Tensor& tensor, const std::string& what) {
  world_.all_reduce_sum(tensor, what);
}

void FullSharding::reduce_gradients(at::Tensor& loss_sum, int64_t step) {
  if (!batch_invariant_) {  // the backward reduce-scattered the gradients within the shard group
    world_.all_reduce_sum(loss_sum, fmt::format("step {}'s loss", step));
    sharded_->sum_over_replicas(step);
    return;
  }
  ScopedSeconds timed(rank_ordered_sums_.seconds);
  ++rank_ordered_sums_.count;
  sharded_->sum_gradients_in_rank_order(world_, fmt::format("the gradient sums of step {}", step));
  sum_in_rank_order(world_, loss_sum, fmt::format("step {}'s loss", step));
}

// The norm of the gradients over all ranks' shards (each rank's squares summed over the shard
// group: under HSDP the replicas hold the same shards), and each shard's gradient scaled by it.
// Under batch_invariant the norm is that of the full gradients, so that it and the coefficient
// are bit for bit replication's.
double FullSharding::clip_gradients(double max_norm, GradNormAccumulate accumulate) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> shard_grads;
  for (const auto& shard : sharded_->shards()) shard_grads.push_back(shard.grad());
  at::Tensor norm;
  if (batch_invariant_) {
    // Each full gradient's norm as replication computes it, one unit gathered at a time.
    std::vector<at::Tensor> norms;
    sharded_->visit_full_gradients_backward([&](const std::string&, const at::Tensor& g) {
      norms.push_back(one_gradient_norm(g, accumulate));
    });
    std::reverse(norms.begin(), norms.end());  // visited in the backward's order
    norm = total_of_norms(norms);
  } else {
    const bool float32 = accumulate == GradNormAccumulate::kFloat32;
    at::Tensor squares =
        at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(shard_grads.front().device()));
    for (const auto& g : shard_grads) {
      if (!g.defined()) continue;
      const at::Tensor n =
          float32 ? g.norm(2) : at::linalg_vector_norm(g, 2, c10::nullopt, false, at::kDouble);
      squares += n.to(at::kDouble).square();
    }
    sharded_->shard_group().all_reduce_sum(squares, "the gradients' squared norm");
    norm = float32 ? squares.sqrt().to(shard_grads.front().scalar_type()) : squares.sqrt();
  }
  const double total = norm.item<double>();
  clip_with_norm(shard_grads, norm, max_norm, accumulate);
  return total;
}

Snapshot FullSharding::snapshot(const TrainState& state) {
  return take_snapshot(sharded_->snapshot_tensors(), *shard_optimizer_, state);
}

void FullSharding::restore(const Snapshot& snapshot) {
  restore_snapshot(snapshot, sharded_->snapshot_tensors(), *shard_optimizer_);
}

std::function<void(const GradientVisitor&)> FullSharding::gradient_source() {
  return [this](const GradientVisitor& visit) { sharded_->visit_full_gradients_backward(visit); };
}

CheckpointLayout FullSharding::checkpoint_layout() {
  CheckpointLayout layout;
  layout.load = [this](const std::string& name, int64_t first_row, const at::Tensor& rows) {
    load_rows(name, first_row, rows);
  };
  // Its place in its shard group: a load keeps those rows of the weights and moments only.
  layout.rows = plan_.loaded_rows(rank());
  ShardedSaves& saves = layout.saves;
  saves.shard = [this] { return sharded_->checkpoint_shard(*shard_optimizer_); };
  saves.writes = !mesh_.replica || mesh_.replica->rank() == 0;  // one replica writes the shards
  saves.shards = plan_.shard;
  saves.replicas = plan_.hsdp() ? plan_.replicate : 1;
  saves.gather = [this] { sharded_->gather_parameters(); };
  saves.release = [this] { sharded_->release_whole(whole_optimizer_); };
  return layout;
}

std::string FullSharding::describe() const {
  const std::string hsdp = plan_.hsdp()
                               ? fmt::format("HSDP: {} replicas of {} shards; within each, ",
                                             plan_.replicate, plan_.shard)
                               : "";
  const std::string replicas =
      plan_.hsdp() && !batch_invariant_ ? ", then summed over the replicas" : "";
  return fmt::format(
      "{}FSDP: parameters, gradients and AdamW state sharded in {} units, the largest {:.1f} "
      "MiB gathered{}{}, reshard_after_forward {}{}{}",
      hsdp, sharded_->units(), static_cast<double>(sharded_->largest_unit_bytes()) / (1 << 20),
      sharded_->param_dtype() == at::kFloat ? "" : " in bfloat16",
      sharded_->prefetches() ? " (the next unit's all-gather prefetched)" : " (no prefetch)",
      reshard_after_forward_,
      batch_invariant_
          ? std::string("; batch_invariant sends each rank its rows of every rank's gradients, a "
                        "unit at a time, and sums them there in rank order")
          : fmt::format("; gradients reduce-scattered{} as each unit's backward ends",
                        sharded_->reduce_dtype() == at::kFloat ? "" : " in bfloat16"),
      replicas);
}

std::vector<std::string> FullSharding::cost_lines(int64_t steps, double seconds) const {
  std::vector<std::string> out;
  if (rank_ordered_sums_.count > 0) {
    out.push_back(fmt::format(
        "rank-ordered gradient sums: mean {:.1f} ms per step, {:.1f}% of the step time (after "
        "the backward; waits for slower ranks included)",
        1e3 * rank_ordered_sums_.per_count(), rank_ordered_sums_.percent_of(seconds)));
  }
  const auto waits = sharded_->collective_seconds();
  const double n = static_cast<double>(steps);
  out.push_back(fmt::format(
      "FSDP: all-gather waits {:.1f} ms per step ({}), reduce-scatters {:.1f} ms per "
      "step; {:.1f}% of the step time in all",
      1e3 * waits.gather_wait / n, sharded_->prefetches() ? "prefetched" : "no prefetch",
      1e3 * waits.reduce_scatter / n,
      100.0 * (waits.gather_wait + waits.reduce_scatter) / seconds));
  if (plan_.hsdp()) {
    out.push_back(fmt::format("HSDP: gradient sums over the replicas {:.1f} ms per step",
                              1e3 * sharded_->replica_sum_seconds() / n));
  }
  return out;
}

}  // namespace titan

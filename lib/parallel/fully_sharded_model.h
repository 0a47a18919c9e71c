// FSDP over a Model, as torchtitan's FSDP2 applies it: the embedding, each transformer
// block, and the final norm with the output are units (ShardedUnit) whose parameters are split
// over the shard group. Each unit is all-gathered before its forward, released after it as
// parallelism.fsdp_reshard_after_forward says, re-gathered for its backward, and its gradients
// reduce-scattered when its backward is done. The optimizer steps shards(), this rank's pieces.
//
// The model's parameters stay the tensors its modules compute with; outside a unit's compute
// they hold no memory, so whatever reads them between steps goes through this class
// (params_checksum, local_pieces).
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/snapshot.h"
#include "distributed/process_group.h"
#include "model/model.h"
#include "parallel/data_parallel.h"
#include "parallel/sharded_unit.h"

namespace titan {

// parallelism.fsdp_reshard_after_forward, with torchtitan's meaning.
enum class ReshardAfterForward {
  kDefault,  // blocks and the embedding released after their forward; norm and output kept
  kAlways,   // every unit released after its forward
  kNever,    // every unit kept gathered from its forward to its backward
};
ReshardAfterForward reshard_after_forward_of(const std::string& key_value);

class FullyShardedModel {
 public:
  // Requires: `model` holds the same parameters on every rank of `group` (a shard group of 2 or
  // more), or parameters without memory (built shape only: their values come through
  // load_rows), float32 leaves; `group` outlives this. Releases the model's parameters (each rank
  // keeps its shards) and sets the model's unit hooks; the destructor unsets them.
  // `prefetch`: each unit's all-gather starts while the unit before it computes (the next
  // block's in the forward, the previous block's in the backward), as FSDP2 does; one more unit
  // gathered at a time.
  // `replicas` (HSDP; null without): the group of the ranks that hold this rank's shards in the
  // other shard groups, over which sum_over_replicas sums the shards' gradients; outlives this.
  FullyShardedModel(Model model, ProcessGroup& group, ReshardAfterForward reshard,
                    bool prefetch = true, ProcessGroup* replicas = nullptr);
  ~FullyShardedModel();
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;

  // DataParallel::load_rows, into the shards: before the first forward.
  void load_rows(const std::string& name, int64_t first_row, const at::Tensor& values);

  // This rank's shard of each unit, in the model's order: the optimizer's parameters.
  std::vector<at::Tensor> shards() const;

  // training.mixed_precision_reduce: the dtype of each unit's gradient reduce-scatter and of
  // HSDP's sum over the replicas (ShardedUnit::set_reduce_dtype); float32 by default.
  void set_reduce_dtype(at::ScalarType dtype);
  at::ScalarType reduce_dtype() const { return reduce_dtype_; }
  // training.mixed_precision_param under bf16 autocast: the dtype the units' parameters are
  // all-gathered in for the forward and backward (ShardedUnit::set_param_dtype). Checksums and
  // the model-only save gather them exact.
  void set_param_dtype(at::ScalarType dtype);
  at::ScalarType param_dtype() const { return param_dtype_; }
  // Whether backward passes reduce-scatter gradients as they finish (the default). Without, the
  // full gradients stay in the model's parameters, for sum_gradients_in_rank_order.
  void set_reduce_in_backward(bool reduce);
  // debug.batch_invariant, after the backward left this rank's full gradients (its node of the
  // global pairwise tree) in the model's parameters: each shard's gradient set to the sum over
  // the ranks of `world` of their gradients' rows of that shard, in rank order
  // (reduce_scatter_in_rank_order: bit for bit the rank-ordered all-reduce's rows), one unit at
  // a time; each unit's full gradients are dropped once packed. Under HSDP `world` holds every
  // shard group (its ranks replica-major), so the sum runs over all ranks as replication's does.
  // Collective over `world`; `what` names it in errors.
  void sum_gradients_in_rank_order(ProcessGroup& world, const std::string& what);
  // HSDP, after the backward reduce-scattered the gradients within the shard group: each shard's
  // gradient summed over the replicas (all at once, then waited for). Nothing without replicas.
  // Collective over the replica group; `step` names it in errors.
  void sum_over_replicas(int64_t step);

  // The group the parameters are split over (the world under FSDP, a mesh row under HSDP):
  // sums over the shards (a norm's squares) are over it.
  ProcessGroup& shard_group() const { return group_; }
  // The replica group under HSDP; null otherwise.
  ProcessGroup* replica_group() const { return replicas_; }

  // tensors_checksum of the full parameters in the model's order (collective: every rank calls
  // it). On the CPU without gathering them (split_tensors_checksum: chunk hashes and the bytes
  // of chunks that span two ranks move); elsewhere one unit is gathered at a time.
  uint64_t params_checksum();

  // tensors_checksum of the full gradients in the model's order, zeros for a parameter without
  // one: replication's gradients checksum (collective; one unit gathered at a time).
  uint64_t gradients_checksum();
  // Every parameter's full gradient (zeros where it has none) in the order the backward produces
  // them (the model's order reversed), one unit's gathered at a time: visit(name, gradient), the
  // gradient valid during the call only (collective: every rank calls it).
  void visit_full_gradients_backward(const GradientVisitor& visit);
  // What the model's state is on this rank, for snapshots (the rerun check): the shards, then
  // the model's buffers.
  std::vector<at::Tensor> snapshot_tensors() const;

  // Checkpoints (sharded_checkpoint.h). checkpoint_shard: this rank's rows of every parameter
  // and of their AdamW state in `sharded` (the optimizer of shards(), one parameter group), as
  // views of the shards (write them before the next step). Not collective.
  CheckpointShard checkpoint_shard(torch::optim::AdamW& sharded) const;
  // gather_parameters: every unit's parameters gathered into the model (a model-only save
  // reads them whole); release_whole frees them again and clears `whole`'s state (collective).
  void gather_parameters();
  void release_whole(torch::optim::AdamW& whole);
  // After a resume loaded this rank's rows of each parameter's AdamW state (`rows`, in the
  // model's order, as load_checkpoint's RowShare for this rank keeps them): `sharded`'s state of
  // each unit whose parameters all have one. Nothing when `rows` is empty.
  void take_optimizer_rows(const std::vector<std::optional<AdamWParamSnapshot>>& rows,
                           torch::optim::AdamW& sharded);

  // This rank's pieces of every parameter (its real rows of the shard, padding left out), in the
  // model's order.
  std::vector<LocalPiece> local_pieces() const;

  // The bytes of the largest unit's full parameters: what a rank holds gathered at once.
  int64_t largest_unit_bytes() const;
  int64_t units() const { return static_cast<int64_t>(units_.size()); }
  bool prefetches() const { return prefetch_; }
  // The units' waits for all-gathers and reduce-scatters since they were built, summed.
  ShardedUnit::CollectiveSeconds collective_seconds() const;
  // The time sum_over_replicas took since this was built.
  double replica_sum_seconds() const { return replica_sum_seconds_; }

 private:
  class Hooks;
  ShardedUnit& unit_of(ParamUnit unit, int64_t layer);
  uint64_t gathered_params_checksum();
  // Every rank's segment `mine` of `unit` (its shard's size) all-gathered and unpacked into
  // full tensors shaped as the unit's parameters; `what` names it in errors.
  std::vector<at::Tensor> gathered_segments(const ShardedUnit& unit, const at::Tensor& mine,
                                            const std::string& what);
  // `unit`'s full gradients, all-gathered from the shards' gradients (zeros where none).
  std::vector<at::Tensor> gathered_gradients(ShardedUnit& unit);
  bool reshards(ParamUnit unit) const;
  // The head computes with the embedding unit's weight (model/model.h).
  bool tied() const { return model_->args().tie_embeddings; }

  Model model_;
  ProcessGroup& group_;
  ProcessGroup* replicas_;
  double replica_sum_seconds_ = 0;
  at::ScalarType reduce_dtype_ = at::kFloat;
  at::ScalarType param_dtype_ = at::kFloat;
  // Runs `body` with every unit gathering its parameters exact (float32).
  void with_exact_gathers(const std::function<void()>& body);
  ReshardAfterForward reshard_;
  bool prefetch_;
  std::vector<std::unique_ptr<ShardedUnit>> units_;  // embedding, blocks..., head
  std::vector<std::string> names_;                   // the model's parameter names, in order
  // Each name's unit and place in it.
  std::unordered_map<std::string, std::pair<size_t, size_t>> places_;
};

}  // namespace titan

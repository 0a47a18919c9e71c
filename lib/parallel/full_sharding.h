// Full sharding: FSDP over the world, or HSDP (FSDP within each shard group of the mesh, the
// shards' gradients then summed over the replicas). Each rank holds its shards of the parameters,
// gradients and AdamW state (FullyShardedModel). Under debug.batch_invariant each rank's full
// gradients (its node of the sequences' pairwise tree) go, unit by unit, each row to the rank
// that owns it, where they are summed in rank order: the bits of the rank-ordered all-reduce,
// and no rank holds more than its own gradients and one unit's exchange.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/data_parallel.h"
#include "parallel/fully_sharded_model.h"
#include "parallel/hsdp_mesh.h"
#include "util/stopwatch.h"

namespace titan {

class FullSharding : public DataParallel {
 public:
  // Requires: setup.plan.fsdp; the model as make_data_parallel says (collective: every rank
  // builds it). Releases the model's parameters: each rank keeps its shards.
  explicit FullSharding(const DataParallelSetup& setup);

  int64_t ranks() const override { return world_.size(); }
  int64_t rank() const override { return world_.rank(); }
  void sum_over_ranks(at::Tensor& tensor, const std::string& what) override;
  torch::optim::AdamW& optimizer() override { return *shard_optimizer_; }
  void load_rows(const std::string& name, int64_t first_row, const at::Tensor& values) override {
    sharded_->load_rows(name, first_row, values);
  }
  void resume_optimizer_rows(const std::vector<std::optional<AdamWParamSnapshot>>& rows) override {
    sharded_->take_optimizer_rows(rows, *shard_optimizer_);
  }
  void reduce_gradients(at::Tensor& loss_sum, int64_t step) override;
  double clip_gradients(double max_norm, GradNormAccumulate accumulate) override;
  uint64_t params_checksum() override { return sharded_->params_checksum(); }
  uint64_t gradients_checksum() override { return sharded_->gradients_checksum(); }
  Snapshot snapshot(const TrainState& state) override;
  void restore(const Snapshot& snapshot) override;
  std::vector<LocalPiece> local_pieces() const override { return sharded_->local_pieces(); }
  ProcessGroup* pieces_split_over() const override { return &sharded_->shard_group(); }
  std::function<void(const GradientVisitor&)> gradient_source() override;
  CheckpointLayout checkpoint_layout() override;
  std::string describe() const override;
  std::vector<std::string> cost_lines(int64_t steps, double seconds) const override;

 private:
  ProcessGroup& world_;
  DataParallelPlan plan_;
  std::string reshard_after_forward_;  // the key's value, for the start-up log
  std::vector<at::Tensor> params_;     // the model's (they hold memory only while gathered)
  torch::optim::AdamW& whole_optimizer_;
  HsdpMesh mesh_;  // HSDP's shard and replica groups; empty under FSDP (it shards over the world)
  std::unique_ptr<FullyShardedModel> sharded_;
  std::unique_ptr<torch::optim::AdamW> shard_optimizer_;
  // debug.batch_invariant: the gradients are summed after the backward, in rank order
  // (FullyShardedModel::sum_gradients_in_rank_order); otherwise the backward reduce-scatters.
  bool batch_invariant_ = false;
  CostMeter rank_ordered_sums_;
};

}  // namespace titan

// Replication: every rank holds the whole model and its AdamW state, and the gradients are summed
// over the ranks after the backward (GradientReducer: in buckets, or rank-ordered under
// debug.batch_invariant). One process is its case of one rank, with nothing to sum.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/data_parallel.h"
#include "parallel/gradient_reducer.h"

namespace titan {

class Replication : public DataParallel {
 public:
  // Requires: `params` are `model`'s in its order, held by `optimizer` (null: executions that do
  // not update); `group` (null: one process), `model` and `optimizer` outlive this. With a group
  // of several ranks the gradients are summed over it, rank-ordered with `rank_ordered`.
  // `replicated_because`: why a shard degree above 1 replicates ("" when it does not).
  Replication(Model model, std::vector<at::Tensor> params, torch::optim::AdamW* optimizer,
              ProcessGroup* group, bool rank_ordered, std::string replicated_because = "");

  int64_t ranks() const override;
  int64_t rank() const override { return group_ ? group_->rank() : 0; }
  void sum_over_ranks(at::Tensor& tensor, const std::string& what) override;
  torch::optim::AdamW& optimizer() override;
  void load_rows(const std::string& name, int64_t first_row, const at::Tensor& values) override;
  void resume_optimizer_rows(const std::vector<std::optional<AdamWParamSnapshot>>& rows) override;
  void reduce_gradients(at::Tensor& loss_sum, int64_t step) override;
  double clip_gradients(double max_norm, GradNormAccumulate accumulate) override;
  uint64_t params_checksum() override;
  uint64_t gradients_checksum() override;
  Snapshot snapshot(const TrainState& state) override;
  void restore(const Snapshot& snapshot) override;
  std::vector<LocalPiece> local_pieces() const override;
  ProcessGroup* pieces_split_over() const override { return nullptr; }
  std::function<void(const GradientVisitor&)> gradient_source() override { return {}; }
  CheckpointLayout checkpoint_layout() override;
  std::string describe() const override;
  std::vector<std::string> cost_lines(int64_t steps, double seconds) const override;

 private:
  Model model_;
  std::vector<at::Tensor> params_;
  torch::optim::AdamW* optimizer_;
  ProcessGroup* group_;
  std::unique_ptr<GradientReducer> reducer_;  // null for one rank
  std::string replicated_because_;
};

}  // namespace titan

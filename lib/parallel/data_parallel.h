// How the ranks of a run share its work: the one interface that the step, the step engine, the
// instruments, the checkpointer's saves and the start-up and end-of-run logs ask, implemented by
// replication (every rank holds the whole model; one process is replication over one rank) and
// full sharding (FSDP, and HSDP: FSDP within each shard group, summed over the replicas). Which
// strategy runs is decided once, by make_data_parallel from the plan (data_parallel_plan.h);
// nothing outside lib/parallel asks which one it is. docs/parallelism.md says how tensor and
// expert parallelism would plug in.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "config/enums.h"
#include "distributed/process_group.h"
#include "model/model.h"
#include "parallel/data_parallel_plan.h"

namespace titan {

// One parameter's piece held by this rank: the whole parameter under replication, its real rows
// of the shard under FSDP.
struct LocalPiece {
  std::string name;  // the model's ("layers.0.attention.wq.weight")
  at::Tensor value;  // the parameter, or a view of the shard
  at::Tensor grad;   // its gradient (a view of the shard's); undefined while it has none
};

// Visits every parameter's full gradient: visit(name, gradient), the gradient valid during the
// call only.
using GradientVisitor = std::function<void(const std::string& name, const at::Tensor& grad)>;

class DataParallel {
 public:
  virtual ~DataParallel() = default;

  // The ranks training together (1 for one process).
  virtual int64_t ranks() const = 0;
  virtual int64_t rank() const = 0;  // this process's, in 0..ranks()-1
  // Sums `tensor` over every rank, in place (nothing for one rank); `what` names it in errors.
  virtual void sum_over_ranks(at::Tensor& tensor, const std::string& what) = 0;

  // The optimizer the step uses: over the model's parameters, or over this rank's shards.
  virtual torch::optim::AdamW& optimizer() = 0;

  // Where the model's starting values go, before the first step (the initialization, a
  // checkpoint's or a Hugging Face folder's weights): rows [first_row, first_row +
  // values.size(0)) of the parameter named `name` (the model's name) are `values`; this rank
  // keeps the ones it holds and drops the rest. Throws std::invalid_argument for a name the model
  // does not have or rows that do not fit the parameter. Not collective.
  virtual void load_rows(const std::string& name, int64_t first_row, const at::Tensor& values) = 0;
  // After a resume that loaded this rank's rows of each parameter's AdamW state (in the model's
  // order, as load_checkpoint's RowShare from the plan's loaded_rows keeps them): the
  // optimizer()'s state from them. Nothing when `rows` is empty.
  virtual void resume_optimizer_rows(
      const std::vector<std::optional<AdamWParamSnapshot>>& rows) = 0;

  // kTrain with several ranks, after the last backward: every gradient the optimizer steps and
  // `loss_sum` (the step's summed loss, a float64 scalar on the device) summed over the ranks.
  // Collective; `step` names it in errors.
  virtual void reduce_gradients(at::Tensor& loss_sum, int64_t step) = 0;
  // kTrain, after reduce_gradients: the total L2 norm of the whole model's gradients (over every
  // rank's shards), and the gradients the optimizer steps scaled as clip_grad_norm scales them,
  // bit for bit replication's. Collective.
  virtual double clip_gradients(double max_norm, GradNormAccumulate accumulate) = 0;

  // tensors_checksum of the whole model's parameters in its order (collective).
  virtual uint64_t params_checksum() = 0;
  // tensors_checksum of every parameter's gradient in the model's order, zeros for one without
  // (collective).
  virtual uint64_t gradients_checksum() = 0;
  // In-memory copies of this rank's model state and `optimizer()`'s, with `state`; restore puts
  // them back (the rerun check re-executes a step from them).
  virtual Snapshot snapshot(const TrainState& state) = 0;
  virtual void restore(const Snapshot& snapshot) = 0;

  // This rank's piece of every parameter, in the model's order (per-layer norms).
  virtual std::vector<LocalPiece> local_pieces() const = 0;
  // The ranks whose pieces make a parameter whole, over which their squares are summed; null
  // when every rank holds whole parameters.
  virtual ProcessGroup* pieces_split_over() const = 0;
  // Where the numerics trace reads the full gradients from (in the order the backward produces
  // them); empty: from the model's parameters.
  virtual std::function<void(const GradientVisitor&)> gradient_source() = 0;

  // How the checkpointer loads and saves on this rank (sharded_checkpoint.h): loaded weights go
  // through load_rows, keeping the rows this rank holds; a full save writes what this rank holds
  // and a model-only save makes the model whole (a ShardedSaves without `shard` saves the whole
  // model from rank 0). Requires: the strategy outlives the layout's functions.
  virtual CheckpointLayout checkpoint_layout() = 0;

  // The start-up log's description of what the ranks hold and how their gradients meet.
  virtual std::string describe() const = 0;
  // The end-of-run log's lines (without "[titan] ") on the collectives' cost over `steps` steps
  // that took `seconds`; none when nothing was measured.
  virtual std::vector<std::string> cost_lines(int64_t steps, double seconds) const = 0;
};

// What the strategy is built from.
struct DataParallelSetup {
  const Config& config;
  DataParallelPlan plan;
  ProcessGroup& world;
  Model model;
  std::vector<at::Tensor> params;  // the model's, in its order
  // Over `params`; the step's optimizer under replication, and the one a model-only save and a
  // resume use under FSDP. Outlives the strategy.
  torch::optim::AdamW& whole_optimizer;
  bool autocast_bf16 = false;  // the step's autocast (FSDP gathers in bfloat16 under it)
};

// The strategy `setup.plan` names (collective: every rank builds it). The model is built as
// setup.plan.param_memory says. When its parameters hold memory they hold the starting values
// already, the same on every rank (FSDP then keeps each rank's rows and releases them); when
// they hold none (shape only) every starting value comes through load_rows, each rank keeping
// only its rows.
std::unique_ptr<DataParallel> make_data_parallel(const DataParallelSetup& setup);

// load_rows' check: throws its std::invalid_argument unless `values` are rows [first_row,
// first_row + values.size(0)) of a parameter `name` of `sizes`.
void check_rows_fit(const std::string& name, at::IntArrayRef sizes, int64_t first_row,
                    const at::Tensor& values);

// One process holding the whole of `model` (`params`, its parameters in its order), stepped by
// `optimizer` (null for executions that do not update): a replication over one rank, for
// executions outside a run of several (a model copy, a test's model).
std::unique_ptr<DataParallel> one_process(Model model, const std::vector<at::Tensor>& params,
                                          torch::optim::AdamW* optimizer);

}  // namespace titan

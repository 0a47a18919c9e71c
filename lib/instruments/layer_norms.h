// Per-layer norms of a step: for each part of the model (the embedding, each block, the final
// norm, the output layer) the gradient's, the weights' and the optimizer update's L2 norm, and
// (for TensorBoard) histograms of each part's weights and gradients. The update norm is that of
// the change the step made, ||w after - w before||. Where the optimizer measures its own step
// (optim/optimizer.h's UpdateMeasurer: the fused AdamW on a CPU, FSDP's pieces included) it gives
// the weights' and the change's sums of squares, in float64; otherwise the weights are copied
// before a measured step and the norms computed after it, each tensor's in its dtype. Measuring
// reads the parameters and gradients only: the run's numerics are unchanged.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "instruments/instrument.h"
#include "metrics/metrics.h"
#include "metrics/tfevents.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "util/stopwatch.h"

namespace titan {

// The steps it measures: logged ones (metrics.jsonl and TensorBoard show the norms), those with
// TensorBoard histograms (metrics.histogram_freq, on ranks that write event files), and every
// step when the rerun check is armed (its report shows the window before a trigger).
struct LayerNormSchedule {
  int64_t log_freq = 10;
  int64_t steps = 1;           // training.steps: the last step is logged
  int64_t histogram_freq = 0;  // 0: none (or this rank writes no event files)
  bool every_step = false;     // the rerun check is armed
  bool measures(int64_t step) const;
  bool histograms(int64_t step) const;
};

// LayerNorms' finding in a step's outcome (outcome.findings.find<LayerNormsFound>()).
struct LayerNormsFound {
  std::vector<PartNorms> parts;          // in model order
  std::vector<SummaryValue> histograms;  // TensorBoard's, at histogram steps; empty otherwise
};

class LayerNorms : public Instrument {
 public:
  // Groups the parameters by part ("layers.3.attention.wq.weight" is part "3"), from this rank's
  // pieces of them; where the pieces are split over ranks (FSDP) their squares are summed over
  // those ranks (collective: every rank measures the same steps). Requires: `parallel` outlives
  // the instrument.
  LayerNorms(const DataParallel& parallel, const LayerNormSchedule& schedule);

  const char* name() const override { return "per-layer norms"; }
  bool wants_step(int64_t step) const override { return schedule_.measures(step); }
  // Asks the optimizer to measure its step, or where it cannot, copies the weights (the update is
  // their change).
  void before_step(StepContext& context) override;
  // The gradients' norms, after the sum over ranks, before clipping.
  void gradients_ready(const StepRequest& request) override;
  // The parts' norms into the outcome's LayerNormsFound, in model order (and the histograms, at
  // their steps: "layers/<part>/weights" and "layers/<part>/grads" for each part).
  void step_finished(const StepRequest& request, StepOutcome& outcome) override;
  std::string cost_line(const RunTotals& totals) const override;

 private:
  struct Part {
    std::string name;
    std::vector<at::Tensor> params;  // the weights (under FSDP, this rank's pieces of them)
    std::vector<at::Tensor> before;  // the weights at before_step, then minus the weights after
    size_t first = 0;                // its first parameter's index in the model's order
    double grad_norm = 0;
  };
  void add_parameter(const std::string& name, const at::Tensor& value);
  // The L2 norm of each group of tensors (summed over sum_over_'s ranks under FSDP).
  std::vector<double> l2_norms(const std::vector<std::vector<at::Tensor>>& groups) const;
  // `optimizer` as a measurer of every parameter here (FSDP's pieces: views of its shards), or
  // null.
  UpdateMeasurer* measurer_of(torch::optim::AdamW& optimizer) const;
  // The weights' and updates' norms from the copy taken before the step, or from the measurer.
  void norms_from_copy(std::vector<PartNorms>& out);
  void norms_from_measurer(std::vector<PartNorms>& out);

  LayerNormSchedule schedule_;
  std::vector<Part> parts_;
  std::vector<at::Tensor> params_;  // every parameter once, in the model's order
  // Every parameter's gradient (or under FSDP this rank's piece of it), in the model's order, as
  // the step left them.
  std::function<std::vector<at::Tensor>()> gradients_;
  ProcessGroup* sum_over_ = nullptr;  // the pieces' ranks; null: every rank has all of them
  bool measuring_ = false;
  UpdateMeasurer* measurer_ = nullptr;  // this step's, when the optimizer measures it
  bool with_histograms_ = false;
  std::vector<SummaryValue> histograms_;
  CostMeter cost_;  // measured steps and their time
};

// A histogram of the finite ones of `values` (any dtype, flattened, in float64) in `buckets`
// equal-width buckets from their min to their max, as TensorBoard's HistogramProto holds it;
// inf and NaN are left out and counted in `non_finite`.
Histogram make_histogram(const std::vector<at::Tensor>& values, int64_t buckets = 30);

// The part a parameter named `name` belongs to: "layers.3.feed_forward.w1.weight" -> "3",
// "tok_embeddings.weight" -> "tok_embeddings".
std::string part_of(const std::string& name);

// The MoE sub-part a parameter also belongs to, its norms reported beside its block's:
// "layers.3.moe.experts.w1" -> "3.moe.experts", "layers.3.moe.router.gate.weight" ->
// "3.moe.router", "layers.3.moe.shared_experts.w1.weight" -> "3.moe.shared_experts"; "" for
// any other parameter.
std::string moe_part_of(const std::string& name);

}  // namespace titan

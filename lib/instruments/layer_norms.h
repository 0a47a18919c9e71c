// Per-layer norms of a step: for each part of the model (the embedding, each block, the final
// norm, the output layer) the gradient's, the weights' and the optimizer update's L2 norm, and
// (for TensorBoard) histograms of each part's weights and gradients. The update norm is that of
// the change the step made, ||w after - w before||, so the weights are copied before a measured
// step. Measuring reads the parameters and gradients only: the run's numerics are unchanged.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "metrics/tfevents.h"
#include "model/llama.h"

namespace titan {

class LayerNormMeter {
 public:
  // Groups `model`'s parameters by part ("layers.3.attention.wq.weight" is part "3"). Requires:
  // the model outlives the meter.
  explicit LayerNormMeter(Transformer& model);

  // Call in this order around one step: begin before it (copies the weights), record_gradients
  // after its last backward and gradient reduction, before clipping, and end after the optimizer.
  // With `histograms`, the step's weight and gradient histograms are kept too.
  void begin(bool histograms);
  void record_gradients();
  // The parts' norms, in model order. Requires: begin and record_gradients called for the step.
  std::vector<PartNorms> end();

  // After end() of a step begun with histograms: "layers/<part>/weights" and
  // "layers/<part>/grads" for each part.
  const std::vector<SummaryValue>& histograms() const { return histograms_; }

  bool measuring() const { return measuring_; }
  // Time spent in begin, record_gradients and end since construction, and the steps ended.
  double seconds() const { return seconds_; }
  int64_t steps() const { return steps_; }

 private:
  struct Part {
    std::string name;
    std::vector<at::Tensor> params;
    std::vector<at::Tensor> before;  // the weights at begin(), then (end) minus the weights after
    double grad_norm = 0;
  };
  std::vector<Part> parts_;
  std::vector<SummaryValue> histograms_;
  bool measuring_ = false;
  bool with_histograms_ = false;
  double seconds_ = 0;
  int64_t steps_ = 0;
};

// A histogram of `values` (any dtype, flattened, in float64) in `buckets` equal-width buckets
// from its min to its max, as TensorBoard's HistogramProto holds it.
Histogram make_histogram(const std::vector<at::Tensor>& values, int64_t buckets = 30);

// The part a parameter named `name` belongs to: "layers.3.feed_forward.w1.weight" -> "3",
// "tok_embeddings.weight" -> "tok_embeddings".
std::string part_of(const std::string& name);

}  // namespace titan

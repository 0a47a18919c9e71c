// The per-layer norms of the steps before a rerun trigger, as the rerun report shows them: for
// each part of the model, its update and gradient norms at the trigger step against their median
// over the window's earlier steps, and the step at which its update first grew past twice that
// median; the part whose updates grew first is named (an update spike often precedes the loss
// spike).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "metrics/metrics.h"

namespace titan {

struct LayerNormsAt {
  int64_t step = 0;
  std::vector<PartNorms> parts;
};

// The last `capacity` measured steps.
class LayerWindow {
 public:
  explicit LayerWindow(int64_t capacity) : capacity_(capacity) {}
  void add(int64_t step, std::vector<PartNorms> parts);
  // The window as it stands, oldest first.
  std::vector<LayerNormsAt> steps() const { return {steps_.begin(), steps_.end()}; }

 private:
  size_t capacity_;
  std::deque<LayerNormsAt> steps_;
};

// A part's update grew when its update norm exceeds this factor times its median over the
// window's steps before.
constexpr double kUpdateGrowthFactor = 2.0;

// The report's section for a window whose last step is the trigger step; "" for an empty window.
std::string format_layer_window(const std::vector<LayerNormsAt>& window);

}  // namespace titan

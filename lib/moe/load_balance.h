// Auxiliary-loss-free load balancing as torchtitan v0.2.2's optimizer pre-hook performs it
// (torchtitan/components/optimizer.py, build_optimizers_with_moe_load_balancing), with the
// tokens counted once per step (torchtitan counts a recomputed forward again and halves the
// count under AC; here a recompute never counts: moe/moe.h).
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"

namespace titan::moe {

// Sums a tensor over the data-parallel ranks in place (every rank gets the sum).
using SumOverRanks = std::function<void(at::Tensor&)>;

// Before the optimizer step: sums every layer's tokens_per_expert over the ranks (in place), then
// for each layer that updates its bias, expert_bias += d - mean(d) with
// d = coeff * sign(mean(counts) - counts). Every rank computes the same update from the same
// sums. Returns the sums, (layers, E) float32 (undefined without MoE layers: nothing done).
at::Tensor balance_experts(const std::vector<ExpertLoad>& loads,
                           const SumOverRanks& sum_over_ranks);

// Zeroes every layer's tokens_per_expert (a step starts counting afresh).
void reset_expert_counts(const std::vector<ExpertLoad>& loads);

}  // namespace titan::moe

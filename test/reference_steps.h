// The reference's AdamW steps (llama_reference.py and qwen3_reference.py write them: step_losses,
// step_grad_norms, step_lrs, with the optimizer and schedule in the config) run by titan-train's
// step on a model that holds the reference's starting weights.
#pragma once

#include "model/model.h"
#include "reference_state.h"

namespace titan::test {

struct StepTolerances {
  double loss = 1e-5;       // relative
  double grad_norm = 1e-5;  // relative
};

// Runs the reference's steps on `model` (requires: the reference's weights, as built) and checks
// each step's LR exactly (as float32), its loss and grad norm within `tol` (Catch assertions).
// Returns the worst relative step-loss difference.
double check_reference_steps(const ReferenceState& ref, Model model, bool batch_invariant,
                             StepTolerances tol = {});

}  // namespace titan::test

// What the parity tests share (test_qwen3.cpp, test_moe.cpp, test_deepseek_v3.cpp): a reference
// file's weights copied into a titan-train model, the check of one forward and backward, and for
// the MoE references (qwen3_moe_reference.py, deepseek_v3_reference.py) the router they describe
// and ten AdamW steps with the expert biases they leave.
#pragma once

#include <string>

#include "config/enums.h"
#include "model/model.h"
#include "model/model_args.h"
#include "reference_state.h"

namespace titan::test {

// A reference config's number as an integer.
int64_t integer(const ReferenceState& ref, const std::string& key);

// The MoE layer the reference's config describes.
MoEArgs reference_moe_args(const ReferenceState& ref);

// Copies the reference's starting weights into `model` (requires the same names and shapes:
// Catch assertions) and checkpoints every block with `ac` (bitwise recompute check).
Model with_reference_weights(Model model, const ReferenceState& ref, AcMode ac);

// One forward and backward of the reference's batch: logits, loss and every gradient within 1e-5
// relative, the gradient norm within 1e-4.
void check_reference_gradients(const ReferenceState& ref, Model model);

// The reference's ten AdamW steps (reference_steps.h), then each MoE layer's expert bias
// against the reference's final one and its last step's tokens (every token's top_k choices,
// counted once whatever AC recomputed).
void check_reference_training(const ReferenceState& ref, Model model, bool batch_invariant);

}  // namespace titan::test

// Activation checkpointing for C++: a custom autograd Function that runs a block without
// keeping its activations and recomputes it inside the backward pass (reentrant backward),
// plus the recompute checker that proves the recomputation matched the forward.
//
// libtorch has no C++ checkpoint API and its saved-tensor hooks are Python-only, hence the
// reentrant design, as torch.utils.checkpoint(use_reentrant=True): the forward runs the block
// and keeps only its input; the backward re-enables grad, recomputes from that input under the
// forward's RNG and autocast state, back-propagates the incoming gradient through the
// recomputation (parameters' gradients accumulate as usual) and returns the input's gradient.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "ac/op_trace.h"
#include "config/enums.h"
#include "util/error.h"

namespace titan::ac {

using BlockFn = std::function<at::Tensor(const at::Tensor&)>;

// State shared by all checkpointed blocks of a run: the step (for messages) and where debug
// traces go.
struct CheckpointContext {
  std::atomic<int64_t> step{0};
  std::string debug_dir;  // <dump_folder>/ac_debug
  // Set, around a block's forward, by an observer that traces the block's ops (the numerics trace
  // at op level). One thread has one op recorder, and a checked block's forward holds it, so that
  // forward records checksums and max |value| of its ops and appends them here when it ends.
  // Recomputations do not. Null: no observer.
  OpTrace* observer_trace = nullptr;
};

struct CheckpointOptions {
  std::string block_name = "block";  // "layers.3"
  bool preserve_rng_state = true;
  RecomputeCheck check = RecomputeCheck::kDefault;
  bool debug = false;  // on a mismatch, print both op traces and write them to debug_dir
  std::shared_ptr<CheckpointContext> context = std::make_shared<CheckpointContext>();
};

// The forward and the recomputation of a block did not compute the same thing (exit code 3).
class RecomputeMismatch : public CheckFailure {
 public:
  using CheckFailure::CheckFailure;
};

// block(x) with activation checkpointing. When grad is disabled or x does not require grad,
// simply runs block(x). Requires: `block` depends only on x, its parameters and RNG (anything it
// captures must stay alive until the backward). Throws RecomputeMismatch from the backward when
// the check finds a difference.
at::Tensor checkpoint(const BlockFn& block, const at::Tensor& x, const CheckpointOptions& options);

}  // namespace titan::ac

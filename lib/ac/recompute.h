// Activation checkpointing for C++ (named run_recomputed here, so that "checkpoint" keeps meaning
// the saved training state of lib/checkpoint and train/checkpointer.h): a custom autograd Function
// that runs a block without keeping its activations and recomputes it inside the backward pass
// (reentrant backward), plus the recompute checker that proves the recomputation matched the
// forward.
//
// libtorch has no C++ checkpoint API and its saved-tensor hooks are Python-only, hence the
// reentrant design, as torch.utils.checkpoint(use_reentrant=True): the forward runs the block
// and keeps only its input; the backward re-enables grad, recomputes from that input under the
// forward's RNG and autocast state, back-propagates the incoming gradient through the
// recomputation (parameters' gradients accumulate as usual) and returns the input's gradient.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ac/op_trace.h"
#include "config/enums.h"
#include "model/model.h"
#include "util/error.h"

namespace titan::ac {

// Receives the op trace of each checkpointed block's forward, for an observer that traces the
// block's ops at the same time (the numerics trace at op level): a checked block's forward holds
// the thread's op recorder, so an outer recorder sees none of its ops. Recomputations are not
// passed on.
class OpTraceSink {
 public:
  virtual ~OpTraceSink() = default;
  // Whether the sink records the ops of the forward starting now; if so the forward records
  // checksums and max |value| of its ops' outputs and passes them to add_ops when it ends.
  virtual bool wants_ops() const = 0;
  // The forward's ops, in order. Called only after wants_ops() said true for that forward.
  virtual void add_ops(const std::vector<OpRecord>& ops) = 0;
};

// Where the checkpointed blocks' forward ops go: one slot the blocks share, empty until an
// observer connects to it (after the blocks are wrapped, before their first forward).
class OpTraceSinkSlot {
 public:
  // Sends every later checked forward's ops to `sink` (null: to none).
  void connect(std::shared_ptr<OpTraceSink> sink) { sink_ = std::move(sink); }
  OpTraceSink* sink() const { return sink_.get(); }

 private:
  std::shared_ptr<OpTraceSink> sink_;
};

struct RecomputeOptions {
  std::string block_name = "block";  // "layers.3"
  bool preserve_rng_state = true;
  RecomputeCheck check = RecomputeCheck::kDefault;
  bool debug = false;     // on a mismatch, print both op traces and write them to debug_dir
  std::string debug_dir;  // <dump_folder>/ac_debug; "" prints only
  std::shared_ptr<const OpTraceSinkSlot> trace_sink;  // null: no observer
};

// The forward and the recomputation of a block did not compute the same thing (exit code 3).
// The backward that finds it does not know the training step: whoever runs the step names it
// (at_step) before the error reaches the user.
class RecomputeMismatch : public CheckFailure {
 public:
  // `finding` says what differed (after "at <where>: "); `traces` holds both op traces (debug
  // mode) or is empty.
  RecomputeMismatch(std::string block, std::string finding, std::string traces, bool debug,
                    std::string debug_dir);

  // The same mismatch, its message naming `step`. In debug mode it carries both traces as its
  // details (printed with the error) and (with a debug_dir) writes them to
  // <debug_dir>/step<N>_<block>.txt, named in the hint.
  RecomputeMismatch at_step(int64_t step) const;

 private:
  RecomputeMismatch(const RecomputeMismatch& unnamed, int64_t step, const std::string& hint,
                    const std::string& details = "");

  std::string block_, finding_, traces_;
  bool debug_ = false;
  std::string debug_dir_;
};

// block(x) with activation checkpointing. When grad is disabled or x does not require grad,
// simply runs block(x). Requires: `block` depends only on x, its parameters and RNG (anything it
// captures must stay alive until the backward). Throws RecomputeMismatch from the backward when
// the check finds a difference.
at::Tensor run_recomputed(const BlockFunction& block, const at::Tensor& x,
                          const RecomputeOptions& options);

}  // namespace titan::ac

// Whether the current thread is recomputing a checkpointed block (activation checkpointing's
// backward, lib/ac): a layer with side effects on its forward (an MoE layer counting the tokens
// each expert received) performs them once per step, in the forward, not again in the recompute.
#pragma once

namespace titan {

// True on this thread while a RecomputeScope lives.
bool recomputing();

// Marks the thread as recomputing for its lifetime (nests).
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

}  // namespace titan

// Validation ([validation], torchtitan's): at step 1 and every validation.freq steps, the loss on
// validation.steps batches of a validation set (or, with -1, the whole set once), without
// gradients or dropout, through run_step's evaluate mode: each batch's loss is its summed
// cross-entropy over all ranks' tokens, and the result is their mean over batches. The set has a
// reader of its own whose position moves on from one validation to the next and is saved in
// checkpoints (a resumed run validates on the batches a straight one does). It reads the model
// only: the training bits do not change. SIGTERM or SIGINT (on any rank) ends a validation before
// its next batch, unlogged, its reader back where it started, so that the run's stop check can
// save and stop at once, as a Slurm preemption expects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "data/sources.h"
#include "data/step_batches.h"
#include "distributed/process_group.h"
#include "instruments/instrument.h"
#include "util/stopwatch.h"

namespace titan {

// A validation pass after a step: Validation's finding in the step's outcome
// (outcome.findings.find<Validated>()).
struct Validated {
  double loss = 0;     // mean over its batches of each batch's loss over all ranks' tokens
  int64_t tokens = 0;  // evaluated on this rank
  int64_t batches = 0;
  double seconds = 0;
};

class Validation : public Instrument {
 public:
  // Reads `source` (the validation set) as this rank's share of `layout`'s batches; `group` (the
  // job's, outlives this) agrees on stops between batches. Throws ConfigError for
  // validation.steps = -1 on an endless set.
  Validation(const ValidationConfig& config, std::shared_ptr<const TokenSource> source,
             const BatchLayout& layout, ProcessGroup& group);

  const char* name() const override { return "validation"; }
  std::string describe() const override;
  bool wants_step(int64_t step) const override { return step == 1 || step % freq_ == 0; }
  // Validates, into the outcome's Validated.
  void after_step(StepContext& context, StepOutcome& outcome) override;
  std::string cost_line(const RunTotals& totals) const override;
  std::string checkpoint_state() const override;
  void restore_checkpoint_state(const std::string& bytes) override;

 private:
  int64_t freq_;
  int64_t steps_;  // batches per validation; -1: one pass over the set
  std::shared_ptr<const TokenSource> source_;
  StepBatches batches_;
  ProcessGroup& group_;
  CostMeter cost_;
};

}  // namespace titan

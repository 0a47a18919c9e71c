// The debugging instruments' one interface. The training loop (lib/train/trainer.h) holds a list
// of them and, for every step, asks each whether it wants the step; those that do are called
// before it, watch its execution as StepObservers (step_starting, forward_starting,
// gradients_ready before clipping, step_finished with the outcome), and are called after it, in
// list order. Each gives its own line for the start-up log and for the end-of-run log. An
// instrument adds code and a line in make_instruments (instruments/instruments.h), nothing else.
//
// Instruments may read everything; they must not change the bits of the run's steps (the rerun
// check's actions, which the user asks for, are the exception). A re-execution goes through the
// engine (StepEngine::execute), the same code as the run's step.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/loader.h"
#include "step/step.h"
#include "step/step_engine.h"

namespace titan {

// The step an instrument is called around.
struct StepContext {
  int64_t step = 0;
  const std::vector<Batch>& batches;  // this rank's micro-batches of the step
  StepEngine& engine;                 // its state is before the step in before_step, after it in
                                      // after_step
  std::ostream& console;
};

// What the run did, for the cost lines.
struct RunTotals {
  int64_t steps = 0;   // completed by this process
  double seconds = 0;  // the steps' wall time
  double step_seconds() const { return steps > 0 ? seconds / static_cast<double>(steps) : 0; }
};

class Instrument : public StepObserver {
 public:
  // Its name in the log ("numerics trace", "rerun check").
  virtual const char* name() const = 0;

  // Its line for the start-up log, without the "[titan] " prefix; "" for none.
  virtual std::string describe() const { return ""; }

  // When the run's outputs open (after the run's lock is taken, before any step; `resume_step` > 0
  // for a resumed run): makes its folders and files, refusing planted links, so that a run
  // refused for them leaves no output behind it.
  virtual void open_outputs(int64_t resume_step) {}

  // Whether it observes step `step` (called before each step, before any before_step).
  virtual bool wants_step(int64_t step) const = 0;

  // Before the step executes, with the state before it.
  virtual void before_step(StepContext& context) {}

  // After the run's step executed and completed. May execute it again through the engine, and
  // change `outcome` (the rerun check's skip and continue actions).
  virtual void after_step(StepContext& context, StepOutcome& outcome) {}

  // Its line (or lines) for the end-of-run log, without the "[titan] " prefix; "" for none.
  virtual std::string cost_line(const RunTotals& totals) const { return ""; }

  // Its position for checkpoints ("" when it keeps none), saved with this rank's train state
  // under name(), and given back on resume.
  virtual std::string checkpoint_state() const { return ""; }
  virtual void restore_checkpoint_state(const std::string& bytes) {}
};

}  // namespace titan

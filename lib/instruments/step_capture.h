// Step capture (debug.capture_steps): before a listed step runs, its state (a full checkpoint of
// the model, optimizer and RNG) and its batch are written to <dump_folder>/capture/step<N>/;
// after it, precision attribution's two executions of the step from that state
// (instruments/precision_probe.h: the run's dtype, checked bit for bit against the step the run
// took, and float64) give the op trace: every top-level op's output checksum and norm, each
// gradient's checksum, and each op's added error against float64 on this machine. The machine
// and build (machine.txt) and the config go beside them. `titan-train replay` executes the step
// again elsewhere and compares (train/replay.h). The format is instruments/capture_format.h.
//
// The run is untouched (the executions run on model copies, the RNG is put back): fingerprint.log
// is the same with and without captures. One process only (check_precision_steps refuses more).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config/config.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "instruments/precision_probe.h"
#include "model/model_args.h"
#include "util/stopwatch.h"

namespace titan {

class StepCapture : public Instrument {
 public:
  // `machine` gives machine.txt's text when a step is captured (what decides bits beyond the
  // config: versions, device, kernels, threads, ISA).
  StepCapture(const Config& config, const RunFolder& folder, const ModelArgs& args,
              const StepOptions& options, std::function<std::string()> machine);

  const char* name() const override { return "step capture"; }
  std::string describe() const override;
  bool wants_step(int64_t step) const override { return steps_.count(step) > 0; }
  // Makes capture/; refuses (ConfigError) a step still to run whose capture folder exists: a
  // capture is never overwritten.
  void open_outputs(int64_t resume_step) override;
  void before_step(StepContext& context) override;                       // state and batch
  void after_step(StepContext& context, StepOutcome& outcome) override;  // trace; renamed in place
  std::string cost_line(const RunTotals& totals) const override;

  // The test-only seam of precision_probe.h (a planted op in the captured executions).
  void set_block_output_hook(std::shared_ptr<BlockOutputHook> hook) {
    probe_.set_block_output_hook(std::move(hook));
  }

 private:
  void write_state(StepContext& context);
  std::string final_folder(int64_t step) const;

  Config run_config_;  // config.toml
  Config config_;      // the probe's: float64 reference whatever precision_reference says
  RunFolder folder_;
  std::set<int64_t> steps_;
  std::function<std::string()> machine_;
  PrecisionProbe probe_;
  std::optional<PrecisionProbe::KeptState> kept_;
  std::string temp_;  // the capture being written, "" between steps
  CostMeter cost_;
  uint64_t bytes_ = 0;
};

}  // namespace titan

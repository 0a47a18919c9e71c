#include "train/run.h"

#include "train/run_log.h"
#include "train/run_outputs.h"
#include "train/run_parts.h"
#include "train/trainer.h"

namespace titan {

std::unique_ptr<Run> Run::open(const Config& config, std::ostream& console,
                               const RunContextOptions& options) {
  std::unique_ptr<Run> run(new Run());
  run->context_ = build_run_context(config, console, options);
  run->parts_ = std::make_unique<RunParts>(run->context_);
  run->outputs_ =
      std::make_unique<RunOutputs>(run->context_, run->parts_->fingerprint_header(),
                                   run->parts_->numerics.get(), run->parts_->start.step);
  run->trainer_ = std::make_unique<Trainer>(*run->parts_, *run->outputs_);
  log_run_start(*run->parts_, run->outputs_->console());
  return run;
}

Run::Run() = default;
Run::~Run() = default;

TrainSummary Run::train() { return trainer_->train(); }

NumericsTracer* Run::numerics_tracer() { return parts_->numerics.get(); }

PrecisionProbe* Run::precision_probe() { return parts_->precision.get(); }

}  // namespace titan

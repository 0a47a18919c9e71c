#include "train/run.h"

namespace titan {

std::unique_ptr<Run> Run::open(const Config& config, std::ostream& console,
                               const RunContextOptions& options) {
  std::unique_ptr<Run> run(new Run());
  run->context_ = build_run_context(config, console, options);
  run->trainer_ = std::make_unique<Trainer>(run->context_);
  run->outputs_ =
      std::make_unique<RunOutputs>(run->context_, run->trainer_->fingerprint_header(),
                                   run->trainer_->numerics_tracer(), run->trainer_->resume_step());
  run->trainer_->start(*run->outputs_);
  return run;
}

}  // namespace titan

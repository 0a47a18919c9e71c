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
  const RunParts& parts = *run->parts_;
  run->outputs_ =
      std::make_unique<RunOutputs>(run->context_, parts.fingerprint_header(), parts.tracer.get(),
                                   parts.instruments, parts.start.step);
  run->trainer_ = std::make_unique<Trainer>(*run->parts_, *run->outputs_);
  log_run_start(parts, run->outputs_->console());
  return run;
}

Run::Run() = default;
Run::~Run() = default;

TrainSummary Run::train() { return trainer_->train(); }

std::vector<Instrument*> Run::instruments() const {
  std::vector<Instrument*> out;
  for (const auto& i : parts_->instruments) out.push_back(i.get());
  return out;
}

}  // namespace titan

#include "train/run.h"

#include <fmt/format.h>

#include "train/run_components.h"
#include "train/run_log.h"
#include "train/run_outputs.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/stop_signal.h"

namespace titan {
namespace {

// A SIGTERM or SIGINT recorded since exec (the handlers are installed before libtorch starts)
// stops the run here, before the run folder is touched. The ranks agree, as at every stop check.
void stop_if_signalled_during_start_up(ProcessGroup& group) {
  const int signal = agreed_stop_signal(group, "the start-up stop check");
  if (signal == 0) return;
  throw StoppedBySignal(signal, fmt::format("stopped by {} during start-up, before step 1; "
                                            "nothing was written",
                                            stop_signal_name(signal)));
}

}  // namespace

std::unique_ptr<Run> Run::open(const Config& config, std::ostream& console,
                               const RunContextOptions& options) {
  std::unique_ptr<Run> run(new Run());
  run->context_ = build_run_context(config, console, options);
  run->components_ = build_run_components(run->context_);
  const RunComponents& components = *run->components_;
  stop_if_signalled_during_start_up(*run->context_.process_group);
  run->outputs_ = std::make_unique<RunOutputs>(run->context_, components.fingerprint_header(),
                                               components.instruments, components.start.step);
  run->trainer_ = std::make_unique<Trainer>(*run->components_, *run->outputs_);
  log_run_start(components, run->outputs_->console());
  return run;
}

Run::Run() = default;
Run::~Run() = default;

TrainSummary Run::train() { return trainer_->train(); }

std::vector<Instrument*> Run::instruments() const {
  std::vector<Instrument*> out;
  for (const auto& i : components_->instruments) out.push_back(i.get());
  return out;
}

}  // namespace titan

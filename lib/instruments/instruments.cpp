#include "instruments/instruments.h"

#include "instruments/layer_norms.h"
#include "instruments/precision_probe.h"
#include "instruments/rerun.h"
#include "instruments/rerun_check.h"

namespace titan {

std::vector<std::shared_ptr<Instrument>> make_instruments(const InstrumentSetup& s) {
  const Config& config = s.config;
  std::vector<std::shared_ptr<Instrument>> out;
  if (s.tracer) out.push_back(s.tracer);
  LayerNormSchedule norms;
  norms.log_freq = config.metrics.log_freq;
  norms.steps = config.training.steps;
  norms.histogram_freq = s.writes_tensorboard ? config.metrics.histogram_freq : 0;
  norms.every_step = rerun_armed(config.debug);
  out.push_back(std::make_shared<LayerNorms>(s.model, norms));
  if (!config.debug.precision_steps.empty())
    out.push_back(std::make_shared<PrecisionProbe>(config, s.folder, s.args, s.step_options));
  if (rerun_armed(config.debug))
    out.push_back(std::make_shared<RerunCheck>(config, s.folder, s.tracer, s.dataset, s.rank));
  return out;
}

}  // namespace titan

#include "instruments/instruments.h"

#include "instruments/layer_norms.h"
#include "instruments/precision_probe.h"
#include "instruments/profiler.h"
#include "instruments/rerun.h"
#include "instruments/rerun_check.h"
#include "instruments/step_capture.h"
#include "instruments/validation.h"

namespace titan {
namespace {

std::shared_ptr<Instrument> make_validation(const InstrumentSetup& s) {
  const ValidationConfig& v = s.config.validation;
  auto source = make_token_source(validation_dataset(v, s.config.training.dataset_token_dtype),
                                  s.seed, v.seq_len + 1, s.args.vocab_size, s.text_encoder);
  BatchLayout layout;
  layout.local_batch_size = v.local_batch_size;
  layout.seq_len = v.seq_len;
  layout.rank = s.rank;
  layout.world = s.world;
  layout.global_order = s.config.debug.batch_invariant;
  return std::make_shared<Validation>(v, std::move(source), layout, *s.group);
}

}  // namespace

std::vector<std::shared_ptr<Instrument>> make_instruments(const InstrumentSetup& s) {
  const Config& config = s.config;
  std::vector<std::shared_ptr<Instrument>> out;
  if (s.tracer) out.push_back(s.tracer);
  LayerNormSchedule norms;
  norms.log_freq = config.metrics.log_freq;
  norms.steps = config.training.steps;
  norms.histogram_freq = s.writes_tensorboard ? config.metrics.histogram_freq : 0;
  norms.every_step = rerun_armed(config.debug);
  out.push_back(std::make_shared<LayerNorms>(*s.parallel, norms));
  if (!config.debug.precision_steps.empty())
    out.push_back(std::make_shared<PrecisionProbe>(config, s.folder, s.args, s.step_options));
  if (!config.debug.capture_steps.empty()) {
    out.push_back(
        std::make_shared<StepCapture>(config, s.folder, s.args, s.step_options, s.machine));
  }
  if (rerun_armed(config.debug))
    out.push_back(std::make_shared<RerunCheck>(config, s.folder, s.tracer, s.dataset, s.rank));
  if (config.validation.enable) out.push_back(make_validation(s));
  if (config.profiling.enable_profiling || config.profiling.enable_memory_snapshot) {
    out.push_back(std::make_shared<Profiler>(config.profiling, s.folder, s.rank,
                                             s.step_options.device.is_cuda()));
  }
  return out;
}

}  // namespace titan

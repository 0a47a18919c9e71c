#include "instruments/instruments.h"

#include "instruments/layer_norms.h"
#include "instruments/numerics_trace.h"
#include "instruments/precision_probe.h"
#include "instruments/profiler.h"
#include "instruments/rerun.h"
#include "instruments/rerun_check.h"
#include "instruments/step_capture.h"
#include "instruments/validation.h"
#include "metrics/tensorboard.h"

namespace titan {
namespace {

std::shared_ptr<Instrument> make_validation(const InstrumentSetup& s) {
  const ValidationConfig& v = s.config.validation;
  auto source = make_token_source(validation_dataset(v, s.config.training.dataset_token_dtype),
                                  s.seed, v.seq_len + 1, s.args.vocab_size, s.text_encoder);
  BatchLayout layout;
  layout.local_batch_size = v.local_batch_size;
  layout.seq_len = v.seq_len;
  layout.rank = s.group->rank();
  layout.world = s.group->size();
  layout.global_order = s.config.debug.batch_invariant;
  return std::make_shared<Validation>(v, std::move(source), layout, *s.group);
}

// The numerics tracer, connected to what it observes; null when nothing needs it.
std::shared_ptr<NumericsTracer> make_tracer(const InstrumentSetup& s) {
  Model model = s.model;
  auto tracer = make_numerics_tracer(s.config.debug, model,
                                     s.folder.file(RunFile::kNumerics, s.group->rank()));
  if (!tracer) return nullptr;
  if (s.checkpointed_ops) s.checkpointed_ops->connect(tracer);
  tracer->set_gradient_source(s.parallel->gradient_source());
  return tracer;
}

}  // namespace

std::vector<std::shared_ptr<Instrument>> make_instruments(const InstrumentSetup& s) {
  const Config& config = s.config;
  std::vector<std::shared_ptr<Instrument>> out;
  const std::shared_ptr<NumericsTracer> tracer = make_tracer(s);
  if (tracer) out.push_back(tracer);
  LayerNormSchedule norms;
  norms.log_freq = config.metrics.log_freq;
  norms.steps = config.training.steps;
  const int64_t rank = s.group->rank();
  // Histograms only where this rank writes event files.
  norms.histogram_freq =
      rank_writes_tensorboard(config.metrics, rank) ? config.metrics.histogram_freq : 0;
  norms.every_step = rerun_armed(config.debug);
  out.push_back(std::make_shared<LayerNorms>(*s.parallel, norms));
  if (!config.debug.precision_steps.empty())
    out.push_back(std::make_shared<PrecisionProbe>(config, s.folder, s.args, s.step_options));
  if (!config.debug.capture_steps.empty()) {
    out.push_back(
        std::make_shared<StepCapture>(config, s.folder, s.args, s.step_options, s.machine));
  }
  if (rerun_armed(config.debug))
    out.push_back(std::make_shared<RerunCheck>(config, s.folder, tracer, s.dataset, rank));
  if (config.validation.enable) out.push_back(make_validation(s));
  if (config.profiling.enable_profiling || config.profiling.enable_memory_snapshot) {
    out.push_back(std::make_shared<Profiler>(config.profiling, s.folder, rank,
                                             s.step_options.device.is_cuda()));
  }
  return out;
}

}  // namespace titan

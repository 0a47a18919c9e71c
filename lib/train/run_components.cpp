#include "train/run_components.h"

#include <string>

#include "config/run_folder.h"
#include "distributed/process_group.h"
#include "instruments/instruments.h"
#include "metrics/machine.h"
#include "metrics/tensorboard.h"
#include "models/registry.h"
#include "train/memory_check.h"
#include "train/rank_agreement.h"
#include "util/hash.h"

namespace titan {
namespace {

// The whole model's initialization, each rank keeping its rows of it (parallel->load_rows).
void initialize_weights(RunModel& model, DataParallel& parallel) {
  model.model->init_weights([&parallel](const std::string& name, const at::Tensor& values) {
    parallel.load_rows(name, 0, values);
  });
}

// The start point: a checkpoint or initial weights (over the initialization), the optimizer's
// rows handed to the parallelism, and every rank's agreement on what it starts from.
void find_start(RunComponents& run) {
  ProcessGroup& group = *run.context.process_group;
  run.start = run.checkpointer->resume_or_initialize();
  run.checkpointer->refuse_saves_onto_skipped(run.start.step);
  run.parallel->resume_optimizer_rows(run.start.optimizer_rows);
  run.start.optimizer_rows.clear();
  run.initial_checksum = run.parallel->params_checksum();
  // Under FSDP every rank keeps only its rows of what it loaded, so the ranks compare what they
  // read as well: one relative path can name other weights on each rank.
  check_replicas_agree(group,
                       hash_combine(run.initial_checksum, run.checkpointer->loaded_checksum()), 0);
}

std::unique_ptr<StepEngine> make_step_engine(RunComponents& run, std::vector<at::Tensor> params,
                                             const StepOptions& options) {
  const Config& config = run.context.config;
  StepTarget target;
  target.model = run.model.model;
  target.params = std::move(params);
  target.optimizer = &run.parallel->optimizer();
  target.parallel = run.parallel.get();
  return std::make_unique<StepEngine>(target, run.parallel->optimizer(), options, *run.data.batches,
                                      LRSchedule(config.lr_scheduler, config.training.steps),
                                      config.optimizer.lr, run.plan.tokens_per_step);
}

std::vector<std::shared_ptr<Instrument>> make_run_instruments(RunComponents& run,
                                                              const StepOptions& options) {
  const RunContext& context = run.context;
  ProcessGroup& group = *context.process_group;
  InstrumentSetup setup(context.config, RunFolder(context.config));
  setup.group = &group;
  setup.args = run.model.args;
  setup.step_options = options;
  setup.model = run.model.model;
  setup.parallel = run.parallel.get();
  setup.checkpointed_ops = run.model.checkpointed.trace_sink;
  setup.dataset = run.data.source->describe();
  setup.seed = context.determinism.seed;
  setup.text_encoder = run.data.text.encoder;
  const RunComponents* components = &run;
  setup.machine = [components] {
    return FingerprintLog::format_header(components->fingerprint_header()) +
           machine_details(components->context.device);
  };
  return make_instruments(setup);
}

}  // namespace

void check_config_for_run(const Config& config) {
  plan_run(config, MachineCheck::kIntended);
  text_encoding_for(config, model_args_for(config).vocab_size);
}

std::unique_ptr<RunComponents> build_run_components(const RunContext& context) {
  const Config& config = context.config;
  ProcessGroup& group = *context.process_group;
  auto run = std::make_unique<RunComponents>(context, batch_plan(config.training, group.size()),
                                             data_parallel_plan(config, group.size()));
  const ModelArgs args = model_args_for(config);
  check_memory(args, config, run->plan.micro_batches, context.device,
               run->data_parallel.state_shards());
  const StepOptions options = step_options_for(context);
  run->data = make_training_data(context, args, run->plan);
  run->model = build_run_model(context, args, run->data_parallel, options);
  std::vector<at::Tensor> params = run->model.model->parameters();
  run->optimizer = build_optimizer(params, config.optimizer);
  run->parallel =
      make_data_parallel(DataParallelSetup{config, run->data_parallel, group, run->model.model,
                                           params, *run->optimizer, options.autocast_bf16});
  initialize_weights(run->model, *run->parallel);
  run->checkpointer =
      std::make_unique<Checkpointer>(config, group, run->model.model, *run->optimizer,
                                     *run->data.batches, run->parallel->checkpoint_layout());
  find_start(*run);
  run->engine = make_step_engine(*run, std::move(params), options);
  run->instruments = make_run_instruments(*run, options);
  return run;
}

FingerprintHeader RunComponents::fingerprint_header() const {
  return fingerprint_header_for(context, model.kernels, adamw_kernel_of(*optimizer),
                                data.text.fingerprint);
}

FingerprintHeader fingerprint_header_for(const RunContext& context, const ModelKernels& kernels,
                                         AdamWKernel adamw, const std::string& tokenizer) {
  const c10::Device& device = context.device;
  return FingerprintHeader{
      device.is_cuda() ? "cuda" : "cpu",
      hardware_name(device),
      config_hash(context.config),
      context.determinism,
      to_string(kernels.attention),
      to_string(kernels.swiglu),
      to_string(kernels.rms_norm),
      to_string(adamw),
      context.process_group->numerics_settings(),
      tokenizer,
      kernels.linear == LinearKernel::kAten ? std::string() : linear_kernel_name(kernels.linear)};
}

}  // namespace titan

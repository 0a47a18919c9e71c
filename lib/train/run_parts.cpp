#include "train/run_parts.h"

#include <fmt/format.h>

#include <string>

#include "ac/apply.h"
#include "config/run_folder.h"
#include "distributed/process_group.h"
#include "instruments/instruments.h"
#include "metrics/device_stats.h"
#include "metrics/machine.h"
#include "metrics/tensorboard.h"
#include "optim/optimizer.h"
#include "train/memory_check.h"
#include "train/rank_agreement.h"
#include "util/error.h"
#include "util/hash.h"

namespace titan {

ModelArgs model_args_for(const Config& config) {
  ModelArgs args = model_args_for_flavor(config.model.flavor);
  args.max_seq_len = config.training.seq_len;
  args.dropout = config.model.dropout;
  return args;
}

StepOptions step_options_for(const RunContext& context) {
  const TrainingConfig& t = context.config.training;
  StepOptions options;
  options.device = context.device;
  options.autocast_bf16 = uses_bf16_autocast(t.mixed_precision_param, context.device.is_cuda());
  options.max_norm = t.max_norm;
  options.grad_norm_accumulate = context.config.debug.grad_norm_accumulate;
  options.data_parallel = context.process_group->size();
  options.batch_invariant = context.config.debug.batch_invariant;
  return options;
}

void check_config_for_run(const Config& config) {
  plan_run(config, MachineCheck::kIntended);
  text_encoding_for(config, model_args_for(config).vocab_size);
}

RunParts::RunParts(const RunContext& run_context)
    : context(run_context),
      args(model_args_for(run_context.config)),
      plan(batch_plan(run_context.config.training, run_context.process_group->size())) {
  const Config& config = context.config;
  const auto& t = config.training;
  ProcessGroup& group = *context.process_group;
  const RunFolder folder(config);
  data_parallel = data_parallel_plan(config, group.size());
  check_memory(args, config, plan.micro_batches, context.device, data_parallel.state_shards());
  text = text_encoding_for(config, args.vocab_size);
  source = make_token_source(training_dataset(t), context.determinism.seed, t.seq_len + 1,
                             args.vocab_size, text.encoder);
  BatchLayout layout;
  layout.local_batch_size = t.local_batch_size;
  layout.seq_len = t.seq_len;
  layout.micro_batches = plan.micro_batches;
  layout.rank = group.rank();
  layout.world = group.size();
  layout.global_order = config.debug.batch_invariant;
  batches = std::make_unique<StepBatches>(source, layout);
  // Under FSDP the parameters hold no memory: each rank materializes only its rows, from the
  // initialization or a checkpoint (parallel->load_rows).
  model = Transformer(args, data_parallel.param_memory(context.device));
  model->to(context.device);
  model->train();
  const StepOptions options = step_options_for(context);
  kernels = model_kernels(args, context.device, options.autocast_bf16 ? at::kBFloat16 : at::kFloat);
  tracer = make_numerics_tracer(config.debug, model);
  checkpointed_blocks = ac::apply_activation_checkpointing(
      model, config.activation_checkpoint, folder.subfolder(RunSubfolder::kAcDebug), tracer);
  std::vector<at::Tensor> params = model->parameters();
  optimizer = build_optimizer(params, config.optimizer);
  token_flops = flops_per_token(args, t.seq_len);
  parallel = make_data_parallel(DataParallelSetup{config, data_parallel, group, model, params,
                                                  *optimizer, options.autocast_bf16});
  model->init_weights([this](const std::string& name, const at::Tensor& values) {
    parallel->load_rows(name, 0, values);
  });
  checkpointer = std::make_unique<Checkpointer>(config, group, model, *optimizer, *batches);
  checkpointer->set_model_load(
      [this](const std::string& name, int64_t first_row, const at::Tensor& rows) {
        parallel->load_rows(name, first_row, rows);
      });
  // Under FSDP a resume loads this rank's rows of the weights and moments only (its place in its
  // shard group).
  checkpointer->set_rows(data_parallel.loaded_rows(group.rank()));
  start = checkpointer->resume_or_initialize();
  checkpointer->refuse_saves_onto_skipped(start.step);
  parallel->resume_optimizer_rows(start.optimizer_rows);
  start.optimizer_rows.clear();
  initial_checksum = parallel->params_checksum();
  // Under FSDP every rank keeps only its rows of what it loaded, so the ranks compare what they
  // read as well: one relative path can name other weights on each rank.
  check_replicas_agree(group, hash_combine(initial_checksum, checkpointer->loaded_checksum()), 0);
  checkpointer->set_sharded(parallel->checkpoint_saves());
  if (tracer) tracer->set_gradient_source(parallel->gradient_source());
  StepTarget target;
  target.model = model;
  target.params = params;
  target.optimizer = &parallel->optimizer();
  target.parallel = parallel.get();
  engine = std::make_unique<StepEngine>(target, parallel->optimizer(), options, *batches,
                                        LRSchedule(config.lr_scheduler, t.steps),
                                        config.optimizer.lr, plan.tokens_per_step);
  InstrumentSetup setup(config, folder);
  setup.rank = group.rank();
  setup.world = group.size();
  setup.args = args;
  setup.step_options = options;
  setup.model = model;
  setup.parallel = parallel.get();
  setup.dataset = source->describe();
  setup.writes_tensorboard = rank_writes_tensorboard(config.metrics, group.rank());
  setup.tracer = tracer;
  setup.seed = context.determinism.seed;
  setup.group = &group;
  setup.text_encoder = text.encoder;
  setup.machine = [this] {
    return FingerprintLog::format_header(fingerprint_header()) + machine_details(context.device);
  };
  instruments = make_instruments(setup);
}

RunParts::~RunParts() = default;

FingerprintHeader RunParts::fingerprint_header() const {
  return fingerprint_header_for(context, kernels, adamw_kernel_of(*optimizer), text.fingerprint);
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

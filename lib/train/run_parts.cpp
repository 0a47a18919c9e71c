#include "train/run_parts.h"

#include <fmt/format.h>

#include "ac/apply.h"
#include "distributed/process_group.h"
#include "metrics/device_stats.h"
#include "optim/optimizer.h"
#include "train/memory_check.h"
#include "train/rank_agreement.h"
#include "util/error.h"
#include "util/hash.h"

namespace titan {
namespace {

ModelArgs model_args_for(const Config& config) {
  ModelArgs args = model_args_for_flavor(config.model.flavor);
  args.max_seq_len = config.training.seq_len;
  args.dropout = config.model.dropout;
  return args;
}

}  // namespace

RunParts::RunParts(const RunContext& run_context)
    : context(run_context),
      args(model_args_for(run_context.config)),
      plan(batch_plan(run_context.config.training, run_context.process_group->size())),
      schedule(run_context.config.lr_scheduler, run_context.config.training.steps) {
  const Config& config = context.config;
  const auto& t = config.training;
  ProcessGroup& group = *context.process_group;
  check_memory(args, config, plan.micro_batches, context.device);
  source = make_token_source(t, context.determinism.seed, t.seq_len + 1, args.vocab_size);
  // Batch-invariant runs read the one global sequence of windows on every rank (each rank keeps
  // its own part of a step's): the position is then the same on all ranks and any world size.
  const bool global_order = config.debug.batch_invariant;
  loader = std::make_unique<DataLoader>(source, t.local_batch_size, t.seq_len,
                                        global_order ? 0 : group.rank(),
                                        global_order ? 1 : group.size());
  model = Transformer(args);
  model->to(context.device);
  model->init_weights();
  model->train();
  kernels = model_kernels(args, context.device);
  const bool reruns = RerunCheck::armed(config.debug);
  if (reruns) rerun = std::make_unique<RerunCheck>(config, source->describe(), group.rank());
  numerics =
      make_numerics_tracer(config.debug.numerics_trace, config.debug.numerics_freq, model, reruns);
  checkpointed_blocks = ac::apply_activation_checkpointing(
      model, config.activation_checkpoint, config.job.dump_folder + "/ac_debug", numerics);
  params = model->parameters();
  optimizer = build_optimizer(params, config.optimizer);
  step_options.device = context.device;
  step_options.autocast_bf16 =
      uses_bf16_autocast(t.mixed_precision_param, context.device.is_cuda());
  step_options.max_norm = t.max_norm;
  step_options.grad_norm_accumulate = context.config.debug.grad_norm_accumulate;
  step_options.data_parallel = group.size();
  if (!config.debug.precision_steps.empty())
    precision = std::make_unique<PrecisionProbe>(config, args, step_options);
  token_flops = flops_per_token(args, t.seq_len);
  step_options.batch_invariant = config.debug.batch_invariant;
  if (group.size() > 1) {
    reducer = std::make_unique<GradientReducer>(group, params, int64_t{25} << 20,
                                                config.debug.batch_invariant);
  }
  checkpointer = std::make_unique<Checkpointer>(config, group, model, *optimizer);
  start = checkpointer->resume_or_initialize();
  initial_checksum = tensors_checksum(params);
  check_replicas_agree(group, initial_checksum, 0);
}

RunParts::~RunParts() = default;

FingerprintHeader RunParts::fingerprint_header() const {
  const c10::Device& device = context.device;
  return FingerprintHeader{device.is_cuda() ? "cuda" : "cpu",
                           hardware_name(device),
                           config_hash(context.config),
                           context.determinism,
                           to_string(kernels.attention),
                           to_string(kernels.swiglu),
                           to_string(kernels.rms_norm),
                           to_string(adamw_kernel_for(device)),
                           context.process_group->numerics_settings()};
}

}  // namespace titan

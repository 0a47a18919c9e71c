#include "train/run_model.h"

#include "config/run_folder.h"
#include "distributed/process_group.h"
#include "metrics/device_stats.h"
#include "models/registry.h"

namespace titan {

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

RunModel build_run_model(const RunContext& context, const ModelArgs& args,
                         const DataParallelPlan& plan, const StepOptions& options) {
  const Config& config = context.config;
  RunModel built;
  built.args = args;
  built.model = build_model(args, plan.param_memory(context.device));
  built.model->to(context.device);
  built.model->train();
  built.kernels =
      model_kernels(args, context.device, options.autocast_bf16 ? at::kBFloat16 : at::kFloat);
  built.checkpointed =
      ac::apply_activation_checkpointing(built.model, config.activation_checkpoint,
                                         RunFolder(config).subfolder(RunSubfolder::kAcDebug));
  built.token_flops = flops_per_token(args, config.training.seq_len);
  return built;
}

}  // namespace titan

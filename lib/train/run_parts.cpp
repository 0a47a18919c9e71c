#include "train/run_parts.h"

#include <fmt/format.h>

#include <cstdlib>
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
#include "util/malloc_tuning.h"

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
  check_memory(args, config, plan.micro_batches, context.device,
               data_parallel.fsdp ? data_parallel.shard : 1);
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
  model = Transformer(args);
  model->to(context.device);
  model->init_weights();
  model->train();
  const StepOptions options = step_options_for(context);
  kernels = model_kernels(args, context.device, options.autocast_bf16 ? at::kBFloat16 : at::kFloat);
  tracer = make_numerics_tracer(config.debug, model);
  checkpointed_blocks = ac::apply_activation_checkpointing(
      model, config.activation_checkpoint, folder.subfolder(RunSubfolder::kAcDebug), tracer);
  std::vector<at::Tensor> params = model->parameters();
  optimizer = build_optimizer(params, config.optimizer);
  token_flops = flops_per_token(args, t.seq_len);
  checkpointer = std::make_unique<Checkpointer>(config, group, model, *optimizer, *batches);
  if (data_parallel.fsdp) {
    // A resume loads this rank's rows of the moments only (its place in its shard group).
    checkpointer->set_optimizer_rows({group.rank() % data_parallel.shard, data_parallel.shard});
  }
  start = checkpointer->resume_or_initialize();
  initial_checksum = tensors_checksum(params);
  check_replicas_agree(group, initial_checksum, 0);
  torch::optim::AdamW* stepped = optimizer.get();
  if (data_parallel.fsdp) {
    // TITAN_FSDP_PREFETCH=0 turns prefetching off, to measure what it hides (bench_fsdp.sh).
    const char* prefetch = std::getenv("TITAN_FSDP_PREFETCH");
    if (data_parallel.hsdp())
      mesh = make_hsdp_mesh(group, data_parallel.replicate, data_parallel.shard);
    sharded = std::make_unique<FullyShardedModel>(
        model, mesh.shard ? *mesh.shard : group,
        reshard_after_forward_of(config.parallelism.fsdp_reshard_after_forward),
        !(prefetch && std::string(prefetch) == "0"), mesh.replica.get());
    if (config.training.mixed_precision_reduce == "bfloat16")
      sharded->set_reduce_dtype(at::kBFloat16);
    // Under bf16 autocast the units are gathered in bfloat16 (FSDP's param_dtype); a
    // batch-invariant run gathers them exact, as replication computes from float32 weights.
    if (options.autocast_bf16 && !config.debug.batch_invariant)
      sharded->set_param_dtype(at::kBFloat16);
    shard_optimizer = build_optimizer(sharded->shards(), config.optimizer);
    sharded->take_optimizer_rows(start.optimizer_rows, *shard_optimizer);  // a resume's moments
    start.optimizer_rows.clear();
    stepped = shard_optimizer.get();
    Checkpointer::ShardedSaves saves;
    saves.shard = [this] { return sharded->checkpoint_shard(*shard_optimizer); };
    saves.writes = !mesh.replica || mesh.replica->rank() == 0;  // one replica writes the shards
    saves.shards = data_parallel.shard;
    saves.replicas = data_parallel.hsdp() ? data_parallel.replicate : 1;
    saves.gather = [this] { sharded->gather_parameters(); };
    saves.release = [this] { sharded->release_whole(*optimizer); };
    checkpointer->set_sharded(std::move(saves));
    return_free_heap_to_kernel();  // the whole model each rank built is freed
    if (tracer) {
      tracer->set_gradient_source([this](const NumericsTracer::GradientVisitor& visit) {
        sharded->visit_full_gradients_backward(visit);
      });
    }
  }
  // FSDP takes batch_invariant's rank-ordered sum whole (it holds world x the gradients anyway)
  // and keeps its rows; otherwise its backward reduce-scatters.
  if (group.size() > 1 && (!sharded || config.debug.batch_invariant)) {
    reducer = std::make_unique<GradientReducer>(group, params, kGradientBucketBytes,
                                                config.debug.batch_invariant);
  }
  StepTarget target;
  target.model = model;
  target.params = params;
  target.optimizer = stepped;
  target.reducer = reducer.get();
  target.sharded = sharded.get();
  target.group = &group;
  engine = std::make_unique<StepEngine>(target, *stepped, options, *batches,
                                        LRSchedule(config.lr_scheduler, t.steps),
                                        config.optimizer.lr, plan.tokens_per_step);
  InstrumentSetup setup(config, folder);
  setup.rank = group.rank();
  setup.world = group.size();
  setup.args = args;
  setup.step_options = options;
  setup.model = model;
  setup.sharded = sharded.get();
  setup.shard_group = sharded ? &sharded->shard_group() : &group;
  setup.dataset = source->describe();
  setup.writes_tensorboard = rank_writes_tensorboard(config.metrics, group.rank());
  setup.tracer = tracer;
  setup.seed = context.determinism.seed;
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

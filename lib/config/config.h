// The resolved configuration of a run: one struct per TOML section.
//
// Defaults live here and only here: the field table (schema.h) reads them from a
// default-constructed Config for --help, and the TOML/CLI layers overwrite them. Key names and
// defaults follow torchtitan v0.2.2 where it has them. Help texts live in schema.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/enums.h"

namespace titan {

// Every key of torchtitan v0.2.2's JobConfig is here, with its default (where titan-train's
// default differs, docs/configuration.md says so), and titan-train's own keys beside them. A key
// is one of three kinds (FieldSpec::kind, schema.h): it works as in torchtitan; it is accepted and
// has no effect on the math (a performance knob without a C++ counterpart: a non-default value is
// named in the start-up log); or it is refused at any value but its default.

struct JobConfig {
  std::string description = "";
  std::string dump_folder = "./outputs";
  std::string config_file = "";       // named on the command line (--config); no effect in a file
  bool print_config = false;          // log the resolved config at start
  std::string save_config_file = "";  // "": none; else a JSON copy of the config (dump folder)
  std::string custom_config_module = "";
};

struct ProfilingConfig {
  bool enable_profiling = false;
  std::string save_traces_folder = "profile_traces";
  int64_t profile_freq = 10;
  int64_t profiler_active = 1;
  int64_t profiler_warmup = 3;
  bool enable_memory_snapshot = false;
  std::string save_memory_snapshot_folder = "memory_snapshot";
};

struct ModelConfig {
  std::string name = "llama3";        // the family (config/model_catalog.h)
  std::string flavor = "debugmodel";  // one of the family's flavors
  double dropout = 0.0;
  std::string hf_assets_path = "./tests/assets/tokenizer";
  std::string tokenizer_path = "";  // deprecated alias of hf_assets_path (torchtitan's)
  std::vector<std::string> converters;
  bool print_after_conversion = false;
};

// [training.dataloader] and [validation.dataloader]: torch DataLoader worker settings.
struct DataloaderConfig {
  int64_t num_workers = 0;
  bool persistent_workers = false;
  bool pin_memory = false;
  std::optional<int64_t> prefetch_factor;
};

struct TrainingConfig {
  int64_t local_batch_size = 8;
  int64_t global_batch_size = -1;  // -1: local_batch_size x data-parallel degree
  int64_t seq_len = 2048;
  int64_t steps = 10000;
  double max_norm = 1.0;
  DatasetKind dataset = DatasetKind::kSynthetic;
  std::string dataset_path = "";
  TokenDtype dataset_token_dtype = TokenDtype::kUint16;
  DeviceChoice device = DeviceChoice::kAuto;
  MixedPrecision mixed_precision_param = MixedPrecision::kAuto;
  int64_t cpu_threads = 0;  // 0: all cores
  bool enable_cpu_offload = false;
  TrainingDtype dtype = TrainingDtype::kFloat32;
  std::string mixed_precision_reduce = "float32";
  int64_t gc_freq = 50;
  bool gc_debug = false;
  DataloaderConfig dataloader;
};

struct OptimizerConfig {
  std::string name = "AdamW";
  double lr = 8e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  OptimizerImplementation implementation = OptimizerImplementation::kFused;
  bool early_step_in_backward = false;
};

struct LRSchedulerConfig {
  int64_t warmup_steps = 200;
  std::optional<double> decay_ratio;  // unset: decay over all steps after warmup
  DecayType decay_type = DecayType::kLinear;
  double min_lr_factor = 0.0;
  std::optional<int64_t> total_steps;  // the schedule's length; unset: training.steps
};

struct MetricsConfig {
  int64_t log_freq = 10;
  bool enable_tensorboard = false;
  std::string save_tb_folder = "tb";  // inside job.dump_folder
  bool save_for_all_ranks = false;
  int64_t histogram_freq = 0;  // 0: no histograms
  bool disable_color_printing = false;
  bool enable_wandb = false;
};

struct CheckpointConfig {
  bool enable = false;
  std::string folder = "checkpoint";
  int64_t interval = 500;
  int64_t keep_latest_k = 10;
  bool last_save_model_only = true;
  ExportDtype export_dtype = ExportDtype::kFloat32;
  int64_t load_step = -1;
  std::string initial_load_path;  // weights to start from when there is no checkpoint to resume
  bool initial_load_model_only = true;
  bool initial_load_in_hf = false;
  bool initial_load_in_hf_quantized = false;
  bool last_save_in_hf = false;
  std::string async_mode = "disabled";
  std::vector<std::string> exclude_from_loading;
  bool enable_first_step_checkpoint = false;
  bool create_seed_checkpoint = false;
  bool load_only = false;
  bool enable_ft_dataloader_checkpoints = true;
};

// Torchtitan's degrees. The data-parallel degree is replicate x shard; both run as replication
// (every rank holds all parameters and optimizer state, gradients are all-reduced), so shard
// gives FSDP's numerics without its memory saving. Other parallelisms must stay 1; the keys that
// configure them are accepted and have no effect.
struct ParallelismConfig {
  int64_t data_parallel_replicate_degree = 1;  // -1: fills the world
  int64_t data_parallel_shard_degree = -1;     // -1: fills the world
  int64_t tensor_parallel_degree = 1;
  int64_t pipeline_parallel_degree = 1;
  int64_t context_parallel_degree = 1;
  std::string fsdp_reshard_after_forward = "default";
  bool disable_loss_parallel = false;
  bool enable_async_tensor_parallel = false;
  std::vector<std::vector<std::string>> module_fqns_per_model_part;
  int64_t pipeline_parallel_first_stage_less_layers = 1;
  int64_t pipeline_parallel_last_stage_less_layers = 1;
  std::optional<int64_t> pipeline_parallel_layers_per_stage;
  std::string pipeline_parallel_schedule = "1F1B";
  std::string pipeline_parallel_schedule_csv = "";
  int64_t pipeline_parallel_microbatch_size = 1;
  bool pipeline_parallel_expert_parallel_overlap = true;
  std::string context_parallel_load_balancer = "headtail";
  std::string context_parallel_rotate_method = "allgather";
  int64_t expert_parallel_degree = 1;
  int64_t expert_tensor_parallel_degree = 1;
  std::string expert_parallel_comm_backend = "standard";
};

struct CommConfig {
  CommBackend backend = CommBackend::kAuto;  // auto: nccl on CUDA, gloo on CPU; one process: none
  int64_t init_timeout_seconds = 300;        // rendezvous and collectives up to the end of step 1
  int64_t train_timeout_seconds = 100;       // collectives after step 1
  int64_t trace_buf_size = 20000;            // NCCL's flight recorder entries
  std::string save_traces_folder = "comm_traces";
  std::string save_traces_file_prefix = "rank_";
  std::string mode = "default";
};

struct ActivationCheckpointConfig {
  AcMode mode = AcMode::kSelective;
  std::string selective_ac_option = "2";
  bool preserve_rng_state = true;
  RecomputeCheck determinism_check = RecomputeCheck::kDefault;
  bool debug = false;
  std::vector<std::string> per_op_sac_force_recompute_mm_shapes_by_fqns = {"moe.router.gate"};
  bool early_stop = false;
  double memory_budget = 0.5;
  bool visualize_memory_budget_pareto = false;
};

struct CompileConfig {
  bool enable = false;
  std::vector<std::string> components = {"model", "loss"};
  std::string backend = "inductor";
};

// [quantize.linear.float8], [quantize.linear.mx], [quantize.grouped_mm.float8],
// [quantize.grouped_mm.mx]: read only by model.converters.
struct QuantizeConfig {
  bool float8_enable_fsdp_float8_all_gather = false;
  bool float8_precompute_float8_dynamic_scale_for_fsdp = false;
  std::string float8_recipe_name = "";  // "": none
  std::vector<std::string> float8_filter_fqns;
  bool float8_emulate = false;
  std::string mx_mxfp8_dim1_cast_kernel_choice = "triton";
  std::string mx_recipe_name = "mxfp8_cublas";
  std::vector<std::string> mx_filter_fqns = {"output"};
  std::vector<std::string> grouped_float8_fqns;
  std::string grouped_mx_recipe_name = "mxfp8";
  std::vector<std::string> grouped_mx_fqns;
};

struct MemoryEstimationConfig {
  bool enable = false;
  bool disable_fake_mode = false;
};

struct FaultToleranceConfig {
  bool enable = false;
  std::string process_group = "gloo";
  int64_t process_group_timeout_ms = 10000;
  int64_t replica_id = 0;
  int64_t group_size = 0;
  int64_t min_replica_size = 1;
  std::string semi_sync_method = "";  // "": none
};

struct ExperimentalConfig {
  std::string custom_import = "";
  std::string custom_args_module = "";
};

struct ValidationConfig {
  bool enable = false;
  DatasetKind dataset = DatasetKind::kC4Validation;
  std::string dataset_path = "";
  int64_t local_batch_size = 8;
  int64_t seq_len = 2048;
  int64_t freq = 10;
  int64_t steps = -1;  // -1: the whole validation set
  DataloaderConfig dataloader;
};

struct DebugConfig {
  std::optional<int64_t> seed;  // unset: drawn at start and logged
  bool deterministic = false;
  bool deterministic_warn_only = false;
  int64_t fingerprint_freq = 1;  // parameter checksum in fingerprint.log every N steps
  NumericsTrace numerics_trace = NumericsTrace::kNone;  // what numerics.log records
  int64_t numerics_freq = 1;                            // numerics.log records every N steps
  RerunOn rerun_on = RerunOn::kNone;                    // steps re-executed when they go wrong
  double rerun_spike_factor = 3.0;   // spike: loss > factor x mean of the last window
  int64_t rerun_window = 20;         // losses in the spike mean
  std::vector<int64_t> rerun_steps;  // steps re-executed unconditionally
  RerunAction rerun_action = RerunAction::kStop;
  std::vector<int64_t> precision_steps;  // steps executed again in precision_reference
  PrecisionReference precision_reference = PrecisionReference::kFloat64;
  // Steps captured (state, batch, machine, op trace) for `titan-train replay` elsewhere.
  std::vector<int64_t> capture_steps;
  CpuKernels cpu_kernels = CpuKernels::kFused;  // titan's fused CPU kernels, or ATen's ops
  CpuLinear cpu_linear = CpuLinear::kAten;      // the linear layers' matmuls: ATen's, or oneDNN's
  GradNormAccumulate grad_norm_accumulate = GradNormAccumulate::kFloat32;
  // The same bits whatever the thread count, ranks or micro-batch split of the global batch.
  bool batch_invariant = false;
  bool moe_force_load_balance = false;
  bool qwen3_moe_load_balancing = false;
  bool moe_bf16_experts = false;
};

// Sequences and micro-batches of one optimizer step.
struct BatchPlan {
  int64_t micro_batches = 1;    // gradient accumulation steps per optimizer step
  int64_t tokens_per_step = 0;  // over all ranks: micro_batches x local_batch_size x seq_len x dp
};

// Requires: a validated TrainingConfig and data_parallel >= 1.
BatchPlan batch_plan(const TrainingConfig& training, int64_t data_parallel);

// Which blocks activation checkpointing wraps: 0 none, 1 every block ("full"), N every Nth block
// ("selective" with selective_ac_option = "N"). selective_ac_option is read only in selective
// mode. Throws ConfigError naming the key when it cannot be used there.
int64_t ac_block_period(const ActivationCheckpointConfig& ac);

struct Config {
  JobConfig job;
  ModelConfig model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  LRSchedulerConfig lr_scheduler;
  MetricsConfig metrics;
  ParallelismConfig parallelism;
  CheckpointConfig checkpoint;
  ActivationCheckpointConfig activation_checkpoint;
  CommConfig comm;
  DebugConfig debug;
  ProfilingConfig profiling;
  ValidationConfig validation;
  CompileConfig compile;
  QuantizeConfig quantize;
  MemoryEstimationConfig memory_estimation;
  FaultToleranceConfig fault_tolerance;
  ExperimentalConfig experimental;
  // "file:line:col" of the TOML key that set each value, by "section.key", so that errors found
  // across keys can point at the file; empty (or absent) for defaults and values set by a flag.
  std::map<std::string, std::string> toml_locations;
};

// The data-parallel degree for a world of `world_size` processes: replicate x shard, a -1 filling
// what the other degrees leave. Throws ConfigError naming the key (and its file:line:col) when
// the degrees do not multiply to the world size, or global_batch_size does not divide.
int64_t data_parallel_degree(const Config& config, int64_t world_size);

// Whether training.mixed_precision_param means bfloat16 autocast on a CUDA device (`on_cuda`) or
// the CPU.
bool uses_bf16_autocast(MixedPrecision precision, bool on_cuda);

// Refuses (ConfigError naming the key) debug.precision_steps or debug.capture_steps in a run of
// several processes, and a debug.precision_reference that is the run's own precision.
void check_precision_steps(const Config& config, int64_t world_size, bool on_cuda);

// Refuses (ConfigError naming the key) checkpoint.create_seed_checkpoint in a run of several
// processes: the seed holds one process's initialization (torchtitan's rule too).
void check_seed_checkpoint(const Config& config, int64_t world_size);

// Throws ConfigError naming the keys when debug.batch_invariant is on with what cannot be made
// invariant: CUDA, dropout, precision steps, or several ranks each holding a number of the global
// batch's sequences that is not a power of two (their partial sums would not be subtrees of the
// global batch's pairwise tree).
void check_batch_invariant(const Config& config, int64_t world_size, bool on_cuda);

}  // namespace titan

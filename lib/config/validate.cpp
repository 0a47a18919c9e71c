// Checks that involve more than one key, or values a single key's bounds cannot express.
// Each error names the key and, when a TOML file set it, the file:line:col of that key.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "config/limits.h"
#include "config/loader.h"
#include "config/model_catalog.h"
#include "config/validate_keys.h"
#include "util/error.h"
#include "util/onednn_sgemm.h"

namespace titan {
namespace {

std::string where(const Config& config, const std::string& key) {
  return key_location(config, key);
}

void check_batch(const Config& config) {
  const TrainingConfig& t = config.training;
  if (t.global_batch_size != -1 && t.global_batch_size < 1) {
    throw ConfigError(where(config, "training.global_batch_size"),
                      fmt::format("must be -1 or a positive integer, got {}", t.global_batch_size));
  }
  if (t.global_batch_size != -1 && t.global_batch_size % t.local_batch_size != 0) {
    throw ConfigError(where(config, "training.global_batch_size"),
                      fmt::format("{} is not a multiple of training.local_batch_size = {}",
                                  t.global_batch_size, t.local_batch_size),
                      "gradient accumulation needs global_batch_size = local_batch_size x N");
  }
  // Both factors are bounded by the field table (<= 2^30 and 2^20), so the product fits.
  const int64_t global = t.global_batch_size == -1 ? t.local_batch_size : t.global_batch_size;
  const int64_t tokens = global * t.seq_len;
  if (tokens > limits::kMaxTokensPerStep) {
    const char* key =
        t.global_batch_size == -1 ? "training.local_batch_size" : "training.global_batch_size";
    throw ConfigError(where(config, key),
                      fmt::format("{} sequences x training.seq_len {} = {} tokens per step is more "
                                  "than the limit of {}",
                                  global, t.seq_len, tokens, limits::kMaxTokensPerStep),
                      "lower the batch size or seq_len");
  }
}

void check_dataset(const Config& config) {
  const TrainingConfig& t = config.training;
  const bool has_default_path =
      t.dataset == DatasetKind::kSynthetic || t.dataset == DatasetKind::kC4Test ||
      t.dataset == DatasetKind::kC4 || t.dataset == DatasetKind::kC4Validation;
  if (!has_default_path && t.dataset_path.empty()) {
    throw ConfigError(where(config, "training.dataset"),
                      fmt::format("dataset \"{}\" needs a dataset_path", to_string(t.dataset)),
                      "set training.dataset_path to a file or folder, or use dataset = "
                      "\"synthetic\"");
  }
}

// "0" (every block, as torchtitan reads it) to kMaxSelectiveAcEvery; longer digit strings are
// refused before they could overflow.
std::optional<int64_t> selective_ac_every(const std::string& option) {
  if (option.empty() || option.size() > 7 ||
      option.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int64_t every = std::strtoll(option.c_str(), nullptr, 10);  // at most 7 digits: no overflow
  if (every > limits::kMaxSelectiveAcEvery) return std::nullopt;
  return every == 0 ? 1 : every;
}

// Only selective mode reads the option: "none" and "full" ignore it, so do not refuse it there.
void check_activation_checkpoint(const Config& config) {
  const ActivationCheckpointConfig& ac = config.activation_checkpoint;
  try {
    ac_block_period(ac);
  } catch (const ConfigError& e) {
    throw ConfigError(where(config, e.where()), e.message(), e.hint());
  }
}

// Whether `folder` (relative) names a folder strictly inside the dump folder.
bool stays_inside(const std::string& folder) {
  const std::filesystem::path normal = std::filesystem::path(folder).lexically_normal();
  if (folder.empty() || normal.begin() == normal.end()) return false;
  for (const auto& part : normal) {
    if (part == "..") return false;
  }
  return normal.begin()->string() != ".";
}

void check_checkpoint(const Config& config) {
  const CheckpointConfig& c = config.checkpoint;
  if (c.keep_latest_k == 1) {
    throw ConfigError(where(config, "checkpoint.keep_latest_k"), "1 is not allowed",
                      "keep at least 2 checkpoints (a save can be interrupted), or 0 for all");
  }
  if (c.folder.empty() ||
      (std::filesystem::path(c.folder).is_relative() && !stays_inside(c.folder))) {
    throw ConfigError(where(config, "checkpoint.folder"),
                      fmt::format("\"{}\" is not a folder inside job.dump_folder", c.folder),
                      "name a subfolder (the default is \"checkpoint\"), or give an absolute path");
  }
}

// A schedule shorter than the run leaves the steps after it without a learning rate (its decay
// would extrapolate past the end: a negative or infinite lr).
void check_lr_schedule(const Config& config) {
  const std::optional<int64_t>& total = config.lr_scheduler.total_steps;
  if (!total || *total >= config.training.steps) return;
  throw ConfigError(where(config, "lr_scheduler.total_steps"),
                    fmt::format("{} steps end the schedule before the run's last step "
                                "({} = {})",
                                *total, where(config, "training.steps"), config.training.steps),
                    "set lr_scheduler.total_steps to at least training.steps, or leave it unset "
                    "(the schedule then spans training.steps)");
}

void check_metrics(const Config& config) {
  const std::string& folder = config.metrics.save_tb_folder;
  if (std::filesystem::path(folder).is_absolute() || !stays_inside(folder)) {
    throw ConfigError(where(config, "metrics.save_tb_folder"),
                      fmt::format("\"{}\" is not a folder inside job.dump_folder", folder),
                      "name a subfolder of the dump folder (the default is \"tb\")");
  }
}

void check_parallelism(const Config& config) {
  // Tensor, pipeline and context degrees other than 1 are refused keys (check_key_kinds).
  const ParallelismConfig& p = config.parallelism;
  const std::pair<const char*, int64_t> data_parallel[] = {
      {"parallelism.data_parallel_replicate_degree", p.data_parallel_replicate_degree},
      {"parallelism.data_parallel_shard_degree", p.data_parallel_shard_degree}};
  for (const auto& [key, degree] : data_parallel) {
    if (degree == 0) {
      throw ConfigError(where(config, key), "0 is not a degree",
                        "use a positive degree, or -1 to fill the world size");
    }
  }
  if (p.data_parallel_replicate_degree == -1 && p.data_parallel_shard_degree == -1) {
    throw ConfigError(where(config, "parallelism.data_parallel_replicate_degree"),
                      "only one data-parallel degree can be -1 (data_parallel_shard_degree is -1 "
                      "too)",
                      "set data_parallel_replicate_degree = 1");
  }
}

// oneDNN is found at run time (util/onednn_sgemm.h): a run that asks for it and cannot have it
// stops here, before any output.
void check_cpu_linear(const Config& config) {
  if (config.debug.cpu_linear != CpuLinear::kOnednn) return;
  const OnednnLibrary& onednn = onednn_library();
  if (onednn.loaded) return;
  throw ConfigError(where(config, "debug.cpu_linear"), "\"onednn\": " + onednn.error,
                    "or set debug.cpu_linear = \"aten\"");
}

}  // namespace

int64_t data_parallel_degree(const Config& config, int64_t world_size) {
  const ParallelismConfig& p = config.parallelism;
  const int64_t replicate = p.data_parallel_replicate_degree;
  const int64_t shard = p.data_parallel_shard_degree;
  const int64_t fixed = (replicate == -1 ? 1 : replicate) * (shard == -1 ? 1 : shard);
  if (replicate != -1 && shard != -1 && fixed != world_size) {
    throw ConfigError(where(config, "parallelism.data_parallel_replicate_degree"),
                      fmt::format("data_parallel_replicate_degree {} x data_parallel_shard_degree "
                                  "{} = {}, but the world has {} processes",
                                  replicate, shard, fixed, world_size),
                      "make the product the number of processes, or set one degree to -1");
  }
  if (world_size % fixed != 0) {
    throw ConfigError(where(config, replicate == -1 ? "parallelism.data_parallel_shard_degree"
                                                    : "parallelism.data_parallel_replicate_degree"),
                      fmt::format("{} processes cannot be split into data-parallel groups of {}",
                                  world_size, fixed),
                      "start a multiple of that many processes, or set the degree to -1");
  }
  const TrainingConfig& t = config.training;
  if (t.global_batch_size != -1 && t.global_batch_size % (t.local_batch_size * world_size) != 0) {
    throw ConfigError(where(config, "training.global_batch_size"),
                      fmt::format("{} is not a multiple of local_batch_size {} x data-parallel "
                                  "degree {}",
                                  t.global_batch_size, t.local_batch_size, world_size),
                      "gradient accumulation needs global_batch_size = local_batch_size x "
                      "data-parallel degree x N");
  }
  return world_size;
}

bool uses_bf16_autocast(MixedPrecision precision, bool on_cuda) {
  switch (precision) {
    case MixedPrecision::kBfloat16:
      return true;
    case MixedPrecision::kFloat32:
      return false;
    case MixedPrecision::kAuto:
      return on_cuda;
  }
  return false;
}

void check_precision_steps(const Config& config, int64_t world_size, bool on_cuda) {
  const DebugConfig& d = config.debug;
  if (!d.capture_steps.empty() && world_size > 1) {
    throw ConfigError(where(config, "debug.capture_steps"),
                      fmt::format("a capture is made in one process; this run has {}", world_size),
                      "capture the step in one process (resume its checkpoint there)");
  }
  if (d.precision_steps.empty()) return;
  if (world_size > 1) {
    throw ConfigError(
        where(config, "debug.precision_steps"),
        fmt::format("precision steps run in one process; this run has {}", world_size),
        "run the step to study in one process (resume its checkpoint there)");
  }
  if (d.precision_reference == PrecisionReference::kFloat32 &&
      !uses_bf16_autocast(config.training.mixed_precision_param, on_cuda)) {
    throw ConfigError(where(config, "debug.precision_reference"),
                      "\"float32\" is the run's own precision: it would measure nothing",
                      "use precision_reference = \"float64\" (float32 serves bfloat16 runs)");
  }
}

void check_batch_invariant(const Config& config, int64_t world_size, bool on_cuda) {
  if (!config.debug.batch_invariant) return;
  const std::string key = where(config, "debug.batch_invariant");
  if (config.debug.cpu_linear == CpuLinear::kOnednn) {
    throw ConfigError(key + " with " + where(config, "debug.cpu_linear"),
                      "batch invariance is proven for ATen's matmuls only; oneDNN's sgemm may "
                      "block a GEMM differently when the batch splits differently",
                      "set debug.cpu_linear = \"aten\" for batch-invariant runs");
  }
  if (on_cuda) {
    throw ConfigError(key, "batch-invariant training runs on CPU only for now",
                      "use training.device = \"cpu\", or turn debug.batch_invariant off");
  }
  if (config.training.mixed_precision_reduce != "float32") {
    throw ConfigError(key + " with " + where(config, "training.mixed_precision_reduce"),
                      "batch-invariant runs sum the gradients in float32, in rank order",
                      "set training.mixed_precision_reduce = \"float32\"");
  }
  if (config.model.dropout > 0) {
    throw ConfigError(key + " with " + where(config, "model.dropout"),
                      "dropout draws each rank's masks from its own generator, so its bits "
                      "depend on how the batch is split",
                      "set model.dropout = 0 for batch-invariant runs");
  }
  const BatchPlan plan = batch_plan(config.training, world_size);
  const int64_t per_rank = plan.micro_batches * config.training.local_batch_size;
  if (world_size > 1 && (per_rank & (per_rank - 1)) != 0) {
    throw ConfigError(
        key + " with " + where(config, "training.global_batch_size"),
        fmt::format("each of the {} ranks holds {} sequences of the step; with several ranks "
                    "that must be a power of two, so that a rank's partial sum is a subtree of "
                    "the global batch's pairwise tree",
                    world_size, per_rank),
        "choose global_batch_size = ranks x a power of two (or local_batch_size so)");
  }
}

BatchPlan batch_plan(const TrainingConfig& t, int64_t data_parallel) {
  BatchPlan plan;
  const int64_t per_micro_batch = t.local_batch_size * data_parallel;
  plan.micro_batches = t.global_batch_size == -1 ? 1 : t.global_batch_size / per_micro_batch;
  plan.tokens_per_step = plan.micro_batches * per_micro_batch * t.seq_len;
  return plan;
}

int64_t ac_block_period(const ActivationCheckpointConfig& ac) {
  switch (ac.mode) {
    case AcMode::kNone:
      return 0;
    case AcMode::kFull:
      return 1;
    case AcMode::kMemoryBudget:
      throw ConfigError("activation_checkpoint.mode",
                        "\"memory_budget\" needs torch.compile's min-cut partitioner, which "
                        "titan-train does not have",
                        "use mode = \"full\" (the least memory) or \"selective\"");
    case AcMode::kSelective:
      break;
  }
  const char* key = "activation_checkpoint.selective_ac_option";
  // Op-level selective AC saves some ops' outputs inside each block; titan-train recomputes whole
  // blocks. Recomputation computes the same bits, so this trades memory, not the math.
  if (ac.selective_ac_option == "op") return 1;
  if (auto every = selective_ac_every(ac.selective_ac_option)) return *every;
  throw ConfigError(key,
                    fmt::format("\"{}\" is not an integer from 0 to {}", ac.selective_ac_option,
                                limits::kMaxSelectiveAcEvery),
                    "write selective_ac_option = \"2\" to checkpoint every 2nd block");
}

void validate(const Config& config) {
  check_key_kinds(config);
  check_torchtitan_keys(config);
  check_batch(config);
  check_dataset(config);
  check_activation_checkpoint(config);
  check_checkpoint(config);
  check_lr_schedule(config);
  check_metrics(config);
  check_parallelism(config);
  check_cpu_linear(config);
}

std::vector<std::string> config_warnings(const Config& config) {
  std::vector<std::string> warnings = key_kind_warnings(config);
  const TrainingConfig& t = config.training;
  if (t.dataset == DatasetKind::kSynthetic && !t.dataset_path.empty()) {
    warnings.push_back(
        fmt::format("{}: \"{}\" is ignored: the synthetic dataset is generated from the seed; set "
                    "training.dataset to text, jsonl or tokens to read it",
                    where(config, "training.dataset_path"), t.dataset_path));
  }
  const CatalogEntry* flavor = find_flavor(config.model.name, config.model.flavor);
  if (flavor && !flavor->note.empty()) {
    warnings.push_back(fmt::format("{}: {} {} {}", where(config, "model.flavor"), config.model.name,
                                   config.model.flavor, flavor->note));
  }
  const auto& ac = config.activation_checkpoint;
  if (ac.mode == AcMode::kSelective && ac.selective_ac_option == "op") {
    warnings.push_back(fmt::format(
        "{} = \"op\": op-level selective activation checkpointing runs as full activation "
        "checkpointing here (every block recomputed: the same gradients, less memory, more "
        "compute)",
        where(config, "activation_checkpoint.selective_ac_option")));
  }
  for (int64_t step : config.debug.rerun_steps) {
    if (step <= t.steps) continue;
    warnings.push_back(fmt::format("{}: step {} is after training.steps ({}): it is never rerun",
                                   where(config, "debug.rerun_steps"), step, t.steps));
    break;
  }
  for (int64_t step : config.debug.capture_steps) {
    if (step <= t.steps) continue;
    warnings.push_back(fmt::format("{}: step {} is after training.steps ({}): it is never captured",
                                   where(config, "debug.capture_steps"), step, t.steps));
    break;
  }
  for (int64_t step : config.debug.precision_steps) {
    if (step <= t.steps) continue;
    warnings.push_back(
        fmt::format("{}: step {} is after training.steps ({}): it is never executed in {}",
                    where(config, "debug.precision_steps"), step, t.steps,
                    to_string(config.debug.precision_reference)));
    break;
  }
  return warnings;
}

}  // namespace titan

#include "config/schema.h"

#include <fmt/format.h>

#include <cmath>

#include "config/limits.h"
#include "util/strings.h"

namespace titan {
namespace {

FieldSpec field(const char* section, const char* key, FieldTarget target, const char* help) {
  FieldSpec spec;
  spec.section = section;
  spec.key = key;
  spec.help = help;
  spec.target = std::move(target);
  return spec;
}

FieldSpec with_choices(FieldSpec spec, std::vector<std::string> choices) {
  spec.choices = std::move(choices);
  return spec;
}

template <class E>
FieldSpec enum_field(const char* section, const char* key, E* target, const char* help) {
  EnumTarget t;
  t.get = [target] { return static_cast<size_t>(*target); };
  t.set = [target](size_t index) { *target = static_cast<E>(index); };
  t.names = &enum_names<E>();
  return with_choices(field(section, key, std::move(t), help), enum_names<E>());
}

FieldSpec not_hashed(FieldSpec spec) {
  spec.excluded_from_hash = true;
  return spec;
}

FieldSpec at_least(FieldSpec spec, double min, std::optional<double> max = std::nullopt) {
  spec.min = min;
  spec.max = max;
  return spec;
}

FieldSpec above(FieldSpec spec, double min, std::optional<double> max = std::nullopt) {
  spec.min = min;
  spec.min_exclusive = true;
  spec.max = max;
  return spec;
}

// min <= value < max.
FieldSpec at_least_below(FieldSpec spec, double min, double max) {
  spec = at_least(std::move(spec), min, max);
  spec.max_exclusive = true;
  return spec;
}

constexpr double kMaxSteps = static_cast<double>(limits::kMaxSteps);

std::string format_double(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  // fmt's default is the shortest text that reads back to the same double.
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keep it a TOML float
  return s;
}

}  // namespace

std::string suggest_field_name(const std::string& name, const std::vector<FieldSpec>& fields,
                               const std::vector<std::string>& other_names) {
  const auto dot = name.rfind('.');
  const std::string key = dot == std::string::npos ? name : name.substr(dot + 1);
  for (const auto& f : fields) {
    if (f.key == key && f.name() != name) return f.name();
  }
  std::vector<std::string> names = other_names;
  for (const auto& f : fields) names.push_back(f.name());
  return closest_match(name, names);
}

std::vector<std::string> config_sections() {
  return {"job",         "model",        "training",
          "optimizer",   "lr_scheduler", "metrics",
          "parallelism", "checkpoint",   "activation_checkpoint",
          "comm",        "debug"};
}

std::vector<FieldSpec> config_fields(Config& c) {
  auto& t = c.training;
  auto& ac = c.activation_checkpoint;
  std::vector<FieldSpec> fields{
      not_hashed(field("job", "description", &c.job.description, "Free text describing the run")),
      not_hashed(field("job", "dump_folder", &c.job.dump_folder,
                       "Folder for config.toml, metrics.jsonl, fingerprint.log and other outputs")),

      with_choices(field("model", "name", &c.model.name, "Model family"), {"llama3"}),
      enum_field("model", "flavor", &c.model.flavor, "Model size"),
      at_least(field("model", "dropout", &c.model.dropout,
                     "Dropout probability on the attention and FFN outputs (training only)"),
               0, 0.99),

      at_least(field("training", "local_batch_size", &t.local_batch_size,
                     "Sequences per micro-batch on each rank"),
               1, static_cast<double>(limits::kMaxLocalBatchSize)),
      at_least(field("training", "global_batch_size", &t.global_batch_size,
                     "Sequences per optimizer step over all ranks; -1 means local_batch_size x "
                     "data-parallel degree; larger values accumulate gradients over micro-batches"),
               -1, static_cast<double>(limits::kMaxGlobalBatchSize)),
      at_least(field("training", "seq_len", &t.seq_len, "Tokens per sequence"), 1,
               static_cast<double>(limits::kMaxSeqLen)),
      at_least(field("training", "steps", &t.steps, "Optimizer steps to train"), 1, kMaxSteps),
      above(field("training", "max_norm", &t.max_norm, "Gradient clipping: max total L2 norm"), 0),
      enum_field("training", "dataset", &t.dataset,
                 "Data source: synthetic (built in, generated from the seed), text (.txt "
                 "file or folder), jsonl (one {\"text\": ...} object per line), tokens "
                 "(pre-tokenized .bin shards)"),
      field("training", "dataset_path", &t.dataset_path,
            "File or folder for the text, jsonl and tokens datasets"),
      enum_field("training", "dataset_token_dtype", &t.dataset_token_dtype,
                 "Token width of headerless .bin shards (llm.c headers override it)"),
      not_hashed(enum_field("training", "device", &t.device,
                            "Where to train: auto picks cuda when available, else cpu")),
      enum_field("training", "mixed_precision_param", &t.mixed_precision_param,
                 "Autocast dtype: bfloat16 or float32 (parameters stay float32); auto is bfloat16 "
                 "on CUDA and float32 on CPU"),
      not_hashed(at_least(field("training", "cpu_threads", &t.cpu_threads,
                                "Intra-op CPU threads (also used for OpenBLAS); 0 means all cores"),
                          0, static_cast<double>(limits::kMaxCpuThreads))),

      with_choices(field("optimizer", "name", &c.optimizer.name, "Optimizer"), {"AdamW"}),
      at_least(field("optimizer", "lr", &c.optimizer.lr, "Peak learning rate"), 0),
      at_least_below(field("optimizer", "beta1", &c.optimizer.beta1, "AdamW beta1"), 0, 1),
      at_least_below(field("optimizer", "beta2", &c.optimizer.beta2, "AdamW beta2"), 0, 1),
      above(field("optimizer", "eps", &c.optimizer.eps, "AdamW epsilon"), 0, 1),
      at_least(
          field("optimizer", "weight_decay", &c.optimizer.weight_decay, "Decoupled weight decay"),
          0),

      at_least(field("lr_scheduler", "warmup_steps", &c.lr_scheduler.warmup_steps,
                     "Steps of linear warmup from lr/warmup_steps to lr"),
               0, kMaxSteps),
      at_least(field("lr_scheduler", "decay_ratio", &c.lr_scheduler.decay_ratio,
                     "Fraction of the steps spent decaying at the end; unset: decay right after "
                     "warmup"),
               0, 1),
      enum_field("lr_scheduler", "decay_type", &c.lr_scheduler.decay_type, "Shape of the decay"),
      at_least(field("lr_scheduler", "min_lr_factor", &c.lr_scheduler.min_lr_factor,
                     "The decay ends at lr x min_lr_factor"),
               0, 1),

      not_hashed(at_least(field("metrics", "log_freq", &c.metrics.log_freq,
                                "Log metrics at step 1 and every log_freq steps"),
                          1, kMaxSteps)),
      not_hashed(field("metrics", "enable_tensorboard", &c.metrics.enable_tensorboard,
                       "Write TensorBoard event files (scalars, per-layer norms, histograms)")),
      not_hashed(field("metrics", "save_tb_folder", &c.metrics.save_tb_folder,
                       "TensorBoard's folder inside job.dump_folder; each run writes into a "
                       "<YYYYmmdd-HHMM> subfolder of it")),
      not_hashed(field("metrics", "save_for_all_ranks", &c.metrics.save_for_all_ranks,
                       "Every rank writes TensorBoard events (into rank_<N>/), not rank 0 only")),
      not_hashed(at_least(field("metrics", "histogram_freq", &c.metrics.histogram_freq,
                                "TensorBoard histograms of each block's weights and gradients "
                                "every histogram_freq steps; 0: none"),
                          0, kMaxSteps)),

      at_least(field("parallelism", "data_parallel_replicate_degree",
                     &c.parallelism.data_parallel_replicate_degree,
                     "Data-parallel replicas (DDP); -1 fills the world size"),
               -1, static_cast<double>(limits::kMaxWorldSize)),
      at_least(field("parallelism", "data_parallel_shard_degree",
                     &c.parallelism.data_parallel_shard_degree,
                     "Data-parallel shards (FSDP's degree; run as replication: same numerics, "
                     "parameters not sharded); -1 fills the world size"),
               -1, static_cast<double>(limits::kMaxWorldSize)),
      at_least(field("parallelism", "tensor_parallel_degree", &c.parallelism.tensor_parallel_degree,
                     "Tensor parallelism (not implemented: must be 1)"),
               1, static_cast<double>(limits::kMaxWorldSize)),
      at_least(
          field("parallelism", "pipeline_parallel_degree", &c.parallelism.pipeline_parallel_degree,
                "Pipeline parallelism (not implemented: must be 1)"),
          1, static_cast<double>(limits::kMaxWorldSize)),
      at_least(
          field("parallelism", "context_parallel_degree", &c.parallelism.context_parallel_degree,
                "Context parallelism (not implemented: must be 1)"),
          1, static_cast<double>(limits::kMaxWorldSize)),

      not_hashed(field("checkpoint", "enable", &c.checkpoint.enable,
                       "Save checkpoints, and resume from the latest one at start")),
      not_hashed(
          field("checkpoint", "folder", &c.checkpoint.folder,
                "Checkpoint folder: inside job.dump_folder when relative, as given when absolute")),
      not_hashed(at_least(
          field("checkpoint", "interval", &c.checkpoint.interval, "Save every interval steps"), 1,
          kMaxSteps)),
      not_hashed(at_least(field("checkpoint", "keep_latest_k", &c.checkpoint.keep_latest_k,
                                "Checkpoints to keep; 0 keeps all (1 is not allowed)"),
                          0, kMaxSteps)),
      not_hashed(field("checkpoint", "last_save_model_only", &c.checkpoint.last_save_model_only,
                       "The final save holds the model weights only")),
      not_hashed(enum_field("checkpoint", "export_dtype", &c.checkpoint.export_dtype,
                            "dtype of a model-only final save")),
      not_hashed(at_least(field("checkpoint", "load_step", &c.checkpoint.load_step,
                                "Step to resume from; -1 means the latest"),
                          -1, kMaxSteps)),
      field("checkpoint", "initial_load_path", &c.checkpoint.initial_load_path,
            "Weights to start from (a .safetensors file or a checkpoint folder) when there is no "
            "checkpoint to resume; step 0, fresh optimizer"),

      enum_field("activation_checkpoint", "mode", &ac.mode,
                 "Activation checkpointing of transformer blocks"),
      field("activation_checkpoint", "selective_ac_option", &ac.selective_ac_option,
            "For selective mode: N checkpoints every Nth block"),
      field("activation_checkpoint", "preserve_rng_state", &ac.preserve_rng_state,
            "Replay the forward's RNG state during recompute"),
      enum_field("activation_checkpoint", "determinism_check", &ac.determinism_check,
                 "Compare recomputation with the forward: default (op metadata), bitwise "
                 "(also values), none"),
      field("activation_checkpoint", "debug", &ac.debug,
            "On a recompute mismatch, print and save both op traces"),

      not_hashed(enum_field("comm", "backend", &c.comm.backend,
                            "Collectives between processes: auto (nccl on CUDA, gloo on CPU; "
                            "none for one process), gloo, or nccl (these two also for one "
                            "process: a check of the backend's path)")),
      not_hashed(at_least(field("comm", "init_timeout_seconds", &c.comm.init_timeout_seconds,
                                "Seconds every rank may take to arrive at the rendezvous, and "
                                "collectives may wait up to the end of step 1"),
                          1, 86400)),
      not_hashed(at_least(field("comm", "train_timeout_seconds", &c.comm.train_timeout_seconds,
                                "Seconds a collective may wait for the other ranks after step 1"),
                          1, 86400)),

      at_least(field("debug", "seed", &c.debug.seed,
                     "Base RNG seed (a non-negative integer); unset: drawn at start and logged"),
               0),
      field("debug", "deterministic", &c.debug.deterministic,
            "Use deterministic algorithms wherever possible (may be slower)"),
      field("debug", "deterministic_warn_only", &c.debug.deterministic_warn_only,
            "Warn about ops without a deterministic implementation instead of failing"),
      at_least(field("debug", "fingerprint_freq", &c.debug.fingerprint_freq,
                     "fingerprint.log records a checksum of all parameters every N steps"),
               1, kMaxSteps),
      not_hashed(enum_field("debug", "numerics_trace", &c.debug.numerics_trace,
                            "numerics.log: checksum and statistics of each block's output and "
                            "each gradient (blocks), also of every op inside the blocks (ops), "
                            "or none")),
      not_hashed(at_least(field("debug", "numerics_freq", &c.debug.numerics_freq,
                                "numerics.log records every N steps"),
                          1, kMaxSteps)),
      not_hashed(enum_field("debug", "rerun_on", &c.debug.rerun_on,
                            "Re-execute a step from its kept state when its loss or grad_norm "
                            "is not finite (nan), spikes (spike), either (both), or never (none)")),
      not_hashed(above(field("debug", "rerun_spike_factor", &c.debug.rerun_spike_factor,
                             "A spike is a loss above this factor x the mean of the last "
                             "rerun_window losses"),
                       1.0, 1e9)),
      not_hashed(at_least(field("debug", "rerun_window", &c.debug.rerun_window,
                                "Losses in the spike mean (spikes are detected once it is full)"),
                          1, 100000)),
      not_hashed(at_least(field("debug", "rerun_steps", &c.debug.rerun_steps,
                                "Steps to re-execute unconditionally, e.g. 100,200"),
                          1, kMaxSteps)),
      not_hashed(enum_field("debug", "rerun_action", &c.debug.rerun_action,
                            "After a rerun: stop (exit 1 for nan, else go on), skip (drop the "
                            "step's update), continue (keep the rerun's result)")),
      not_hashed(at_least(field("debug", "precision_steps", &c.debug.precision_steps,
                                "Steps executed again in precision_reference beside the run, "
                                "each op's error reported in <dump_folder>/precision/"),
                          1, kMaxSteps)),
      not_hashed(enum_field("debug", "precision_reference", &c.debug.precision_reference,
                            "The dtype a precision step is executed again in (float32 only "
                            "for bfloat16 runs)")),
      enum_field("debug", "grad_norm_accumulate", &c.debug.grad_norm_accumulate,
                 "Sum the gradient norm's squares in float32 (PyTorch's clip_grad_norm_) or "
                 "float64 (the exact norm, for reporting and clipping)"),
      field("debug", "batch_invariant", &c.debug.batch_invariant,
            "The same bits on any thread count, number of ranks and micro-batch split of the "
            "global batch: one sequence per forward and backward, gradients summed in a fixed "
            "pairwise tree over the global batch's sequences (CPU only)"),
  };
  for (auto& f : fields) f.toml_location = &c.toml_locations[f.name()];
  return fields;
}

std::string FieldSpec::type_name() const {
  struct Visitor {
    std::string operator()(bool*) const { return "bool"; }
    std::string operator()(int64_t*) const { return "integer"; }
    std::string operator()(double*) const { return "float"; }
    std::string operator()(std::string*) const { return "string"; }
    std::string operator()(std::optional<int64_t>*) const { return "integer"; }
    std::string operator()(std::optional<double>*) const { return "float"; }
    std::string operator()(const EnumTarget&) const { return "string"; }
    std::string operator()(std::vector<int64_t>*) const { return "integer list"; }
  };
  return std::visit(Visitor{}, target);
}

bool FieldSpec::has_value() const {
  if (auto p = std::get_if<std::optional<int64_t>*>(&target)) return (*p)->has_value();
  if (auto p = std::get_if<std::optional<double>*>(&target)) return (*p)->has_value();
  return true;
}

std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          out += fmt::format("\\u{:04X}", ch);
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

std::string FieldSpec::value_as_toml() const {
  struct Visitor {
    std::string operator()(bool* v) const { return *v ? "true" : "false"; }
    std::string operator()(int64_t* v) const { return std::to_string(*v); }
    std::string operator()(double* v) const { return format_double(*v); }
    std::string operator()(std::string* v) const { return toml_quote(*v); }
    std::string operator()(std::optional<int64_t>* v) const {
      return v->has_value() ? std::to_string(**v) : "";
    }
    std::string operator()(std::optional<double>* v) const {
      return v->has_value() ? format_double(**v) : "";
    }
    std::string operator()(const EnumTarget& e) const { return toml_quote((*e.names)[e.get()]); }
    std::string operator()(std::vector<int64_t>* v) const {
      std::string out = "[";
      for (size_t i = 0; i < v->size(); ++i) out += (i ? ", " : "") + std::to_string((*v)[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, target);
}

std::vector<ConfigKeyDifference> config_differences(Config a, Config b) {
  auto fa = config_fields(a), fb = config_fields(b);
  std::vector<ConfigKeyDifference> out;
  for (size_t i = 0; i < fa.size(); ++i) {
    auto va = fa[i].has_value() ? fa[i].value_as_toml() : "unset";
    auto vb = fb[i].has_value() ? fb[i].value_as_toml() : "unset";
    if (va != vb) out.push_back({fa[i].name(), va, vb, !fa[i].excluded_from_hash});
  }
  return out;
}

}  // namespace titan

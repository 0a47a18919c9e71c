// The field table's first part: [job], [model], [training], [training.dataloader], [optimizer],
// [lr_scheduler], [metrics].
#include "config/model_catalog.h"
#include "config/schema_build.h"

namespace titan::schema {
namespace {

void add_job(Config& c, std::vector<FieldSpec>& out) {
  auto& j = c.job;
  out.push_back(
      not_hashed(field("job", "description", &j.description, "Free text describing the run")));
  out.push_back(not_hashed(field("job", "dump_folder", &j.dump_folder,
                                 "Folder for config.toml, metrics.jsonl, fingerprint.log and other "
                                 "outputs")));
  out.push_back(no_effect(field("job", "config_file", &j.config_file,
                                "The TOML file read; it is named on the command line (--config or "
                                "--job.config_file)"),
                          "the config file is named on the command line, not inside a file"));
  out.push_back(rank_local(not_hashed(field("job", "print_config", &j.print_config,
                                            "Log the resolved config (as JSON) at start"))));
  out.push_back(not_hashed(field("job", "save_config_file", &j.save_config_file,
                                 "Save the resolved config as JSON under this name in "
                                 "job.dump_folder (rank 0); empty: none")));
  out.push_back(refused(field("job", "custom_config_module", &j.custom_config_module,
                              "A Python module extending the config (torchtitan)"),
                        "titan-train has no Python extension modules: leave it empty"));
}

void add_model(Config& c, std::vector<FieldSpec>& out) {
  auto& m = c.model;
  std::vector<std::string> families;
  for (const FamilyCatalog& f : model_catalog()) families.push_back(f.family.name);
  out.push_back(with_choices(field("model", "name", &m.name, "Model family"), families));
  out.push_back(
      field("model", "flavor", &m.flavor,
            "Model size, a flavor of the model.name family (llama3: tiny, debugmodel, "
            "debugmodel_wide, 1B, 8B, 70B, 405B; qwen3: tiny, debugmodel, 0.6B, 1.7B, 4B, 8B, "
            "14B, 32B, and the MoE tiny_moe, debugmodel_moe, 30B-A3B, 235B-A22B; deepseek_v3: "
            "tiny, debugmodel, 16B, 236B, 671B)"));
  out.push_back(at_least(field("model", "dropout", &m.dropout,
                               "Dropout probability on the attention and FFN outputs (training "
                               "only)"),
                         0, 0.99));
  out.push_back(hashed_when_changed(
      field("model", "hf_assets_path", &m.hf_assets_path,
            "Folder of Hugging Face assets: the tokenizer (tokenizer.json, tokenizer_config.json) "
            "and, for checkpoint.initial_load_in_hf, config.json and the safetensors shards")));
  out.push_back(hashed_when_changed(field("model", "tokenizer_path", &m.tokenizer_path,
                                          "Deprecated: use model.hf_assets_path (this value "
                                          "replaces it when set)")));
  out.push_back(refused(field("model", "converters", &m.converters,
                              "Model converters applied after building (float8, mx)"),
                        "titan-train trains in float32 or bf16 autocast: leave it empty"));
  out.push_back(
      rank_local(not_hashed(field("model", "print_after_conversion", &m.print_after_conversion,
                                  "Log the model's modules and parameter shapes at start "
                                  "(no converter changes them here)"))));
}

void add_dataloader(const char* section, DataloaderConfig& d, std::vector<FieldSpec>& out) {
  out.push_back(no_effect(
      at_least(field(section, "num_workers", &d.num_workers, "Worker processes of the loader"), 0),
      kNoWorkers));
  out.push_back(no_effect(field(section, "persistent_workers", &d.persistent_workers,
                                "Keep the loader's workers between epochs"),
                          kNoWorkers));
  out.push_back(no_effect(
      field(section, "pin_memory", &d.pin_memory, "Page-locked host memory for the batches"),
      "batches are copied to the device as they are; pinning changes only "
      "the copy's speed"));
  out.push_back(no_effect(at_least(field(section, "prefetch_factor", &d.prefetch_factor,
                                         "Batches each worker loads ahead; unset: the loader's"),
                                   1),
                          kNoWorkers));
}

void add_training(Config& c, std::vector<FieldSpec>& out) {
  auto& t = c.training;
  out.push_back(at_least(field("training", "local_batch_size", &t.local_batch_size,
                               "Sequences per micro-batch on each rank"),
                         1, static_cast<double>(limits::kMaxLocalBatchSize)));
  out.push_back(
      at_least(field("training", "global_batch_size", &t.global_batch_size,
                     "Sequences per optimizer step over all ranks; -1 means local_batch_size x "
                     "data-parallel degree; larger values accumulate gradients over micro-batches"),
               -1, static_cast<double>(limits::kMaxGlobalBatchSize)));
  out.push_back(at_least(field("training", "seq_len", &t.seq_len, "Tokens per sequence"), 1,
                         static_cast<double>(limits::kMaxSeqLen)));
  out.push_back(
      at_least(field("training", "steps", &t.steps, "Optimizer steps to train"), 1, kMaxSteps));
  out.push_back(
      above(field("training", "max_norm", &t.max_norm, "Gradient clipping: max total L2 norm"), 0));
  out.push_back(enum_field(
      "training", "dataset", &t.dataset,
      "Data source: synthetic (built in, generated from the seed), text (.txt file or folder), "
      "jsonl (one {\"text\": ...} object per line), tokens (pre-tokenized .bin shards), c4, "
      "c4_test, c4_validation (a local copy in the c4 layout: .json or .json.gz files of JSON "
      "lines with a \"text\" field)"));
  out.push_back(field("training", "dataset_path", &t.dataset_path,
                      "File or folder of the dataset; empty: c4_test reads tests/assets/c4_test"));
  out.push_back(enum_field("training", "dataset_token_dtype", &t.dataset_token_dtype,
                           "Token width of headerless .bin shards (llm.c headers override it)"));
  out.push_back(not_hashed(enum_field("training", "device", &t.device,
                                      "Where to train: auto picks cuda when available, else cpu")));
  out.push_back(enum_field("training", "mixed_precision_param", &t.mixed_precision_param,
                           "Autocast dtype: bfloat16 or float32 (parameters stay float32); auto "
                           "is bfloat16 on CUDA and float32 on CPU"));
  out.push_back(rank_local(not_hashed(at_least(field("training", "cpu_threads", &t.cpu_threads,
                                                     "Intra-op CPU threads (also used for "
                                                     "OpenBLAS); 0 means all cores"),
                                               0, static_cast<double>(limits::kMaxCpuThreads)))));
  out.push_back(refused(field("training", "enable_cpu_offload", &t.enable_cpu_offload,
                              "Keep parameters, gradients and optimizer state in host memory "
                              "(FSDP's CPU offload)"),
                        "train on the CPU with training.device = \"cpu\""));
  out.push_back(refused(enum_field("training", "dtype", &t.dtype,
                                   "dtype of the parameters, gradients and optimizer state"),
                        "keep float32 parameters; training.mixed_precision_param = \"bfloat16\" "
                        "computes in bf16"));
  out.push_back(hashed_when_changed(
      with_choices(field("training", "mixed_precision_reduce", &t.mixed_precision_reduce,
                         "dtype of FSDP's gradient reduce-scatter and HSDP's sum over the "
                         "replicas (FSDP's reduce_dtype): bfloat16 moves half the bytes and sums "
                         "in bfloat16; replication always sums in float32"),
                   {"float32", "bfloat16"})));
  out.push_back(no_effect(
      at_least(field("training", "gc_freq", &t.gc_freq, "Python garbage collection every N steps"),
               1),
      "C++ frees memory as it goes: there is no garbage collector"));
  out.push_back(no_effect(field("training", "gc_debug", &t.gc_debug,
                                "Collect Python garbage every step, reporting tensor cycles"),
                          "C++ frees memory as it goes: there is no garbage collector"));
  add_dataloader("training.dataloader", t.dataloader, out);
}

void add_optimizer(Config& c, std::vector<FieldSpec>& out) {
  auto& o = c.optimizer;
  out.push_back(with_choices(field("optimizer", "name", &o.name, "Optimizer"), {"AdamW"}));
  out.push_back(at_least(field("optimizer", "lr", &o.lr, "Peak learning rate"), 0));
  out.push_back(at_least_below(field("optimizer", "beta1", &o.beta1, "AdamW beta1"), 0, 1));
  out.push_back(at_least_below(field("optimizer", "beta2", &o.beta2, "AdamW beta2"), 0, 1));
  out.push_back(above(field("optimizer", "eps", &o.eps, "AdamW epsilon"), 0, 1));
  out.push_back(
      at_least(field("optimizer", "weight_decay", &o.weight_decay, "Decoupled weight decay"), 0));
  out.push_back(not_hashed(enum_field("optimizer", "implementation", &o.implementation,
                                      "PyTorch's AdamW code path; titan-train's AdamW computes "
                                      "the same bits for all three")));
  out.push_back(refused(field("optimizer", "early_step_in_backward", &o.early_step_in_backward,
                              "Step each parameter during the backward, as its gradient is "
                              "ready"),
                        "the optimizer steps after the backward, once the gradients are clipped"));
}

void add_lr_scheduler(Config& c, std::vector<FieldSpec>& out) {
  auto& l = c.lr_scheduler;
  out.push_back(at_least(field("lr_scheduler", "warmup_steps", &l.warmup_steps,
                               "Steps of linear warmup from lr/warmup_steps to lr"),
                         0, kMaxSteps));
  out.push_back(at_least(field("lr_scheduler", "decay_ratio", &l.decay_ratio,
                               "Fraction of the steps spent decaying at the end; unset: decay "
                               "right after warmup"),
                         0, 1));
  out.push_back(enum_field("lr_scheduler", "decay_type", &l.decay_type, "Shape of the decay"));
  out.push_back(at_least(field("lr_scheduler", "min_lr_factor", &l.min_lr_factor,
                               "The decay ends at lr x min_lr_factor"),
                         0, 1));
  out.push_back(hashed_when_changed(
      at_least(field("lr_scheduler", "total_steps", &l.total_steps,
                     "Steps the schedule spans (warmup, stable, decay); unset: training.steps"),
               1, kMaxSteps)));
}

void add_metrics(Config& c, std::vector<FieldSpec>& out) {
  auto& m = c.metrics;
  out.push_back(not_hashed(at_least(
      field("metrics", "log_freq", &m.log_freq, "Log metrics at step 1 and every log_freq steps"),
      1, kMaxSteps)));
  out.push_back(not_hashed(field("metrics", "enable_tensorboard", &m.enable_tensorboard,
                                 "Write TensorBoard event files (scalars, per-layer norms, "
                                 "histograms)")));
  out.push_back(not_hashed(field("metrics", "save_tb_folder", &m.save_tb_folder,
                                 "TensorBoard's folder inside job.dump_folder; each run writes "
                                 "into a <YYYYmmdd-HHMM> subfolder of it")));
  out.push_back(not_hashed(field("metrics", "save_for_all_ranks", &m.save_for_all_ranks,
                                 "Every rank writes TensorBoard events (into rank_<N>/), not "
                                 "rank 0 only")));
  out.push_back(not_hashed(at_least(field("metrics", "histogram_freq", &m.histogram_freq,
                                          "TensorBoard histograms of each block's weights and "
                                          "gradients every histogram_freq steps (inf and NaN "
                                          "left out, counted as <tag>_non_finite); 0: none"),
                                    0, kMaxSteps)));
  out.push_back(
      rank_local(not_hashed(field("metrics", "disable_color_printing", &m.disable_color_printing,
                                  "Plain console lines; otherwise torchtitan's colours "
                                  "when the console is a terminal"))));
  out.push_back(
      refused(field("metrics", "enable_wandb", &m.enable_wandb, "Log metrics to Weights & Biases"),
              "titan-train reaches no network service: use metrics.enable_tensorboard "
              "(and metrics.jsonl, always written)"));
}

}  // namespace

void add_core_fields(Config& c, std::vector<FieldSpec>& out) {
  add_job(c, out);
  add_model(c, out);
  add_training(c, out);
  add_optimizer(c, out);
  add_lr_scheduler(c, out);
  add_metrics(c, out);
}

}  // namespace titan::schema

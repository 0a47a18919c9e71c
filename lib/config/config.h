// The resolved configuration of a run: one struct per TOML section.
//
// Defaults live here and only here: the field table (schema.h) reads them from a
// default-constructed Config for --help, and the TOML/CLI layers overwrite them. Key names and
// defaults follow torchtitan v0.2.2 where it has them. Help texts live in schema.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace titan {

struct JobConfig {
  std::string description = "";
  std::string dump_folder = "./outputs";
};

struct ModelConfig {
  std::string name = "llama3";
  std::string flavor = "debugmodel";
  double dropout = 0.0;
};

struct TrainingConfig {
  int64_t local_batch_size = 8;
  int64_t global_batch_size = -1;  // -1: local_batch_size x data-parallel degree
  int64_t seq_len = 2048;
  int64_t steps = 10000;
  double max_norm = 1.0;
  std::string dataset = "synthetic";
  std::string dataset_path = "";
  std::string dataset_token_dtype = "uint16";
  std::string device = "auto";
  std::string mixed_precision_param = "bfloat16";
  int64_t cpu_threads = 0;  // 0: all cores
};

struct OptimizerConfig {
  std::string name = "AdamW";
  double lr = 8e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

struct LRSchedulerConfig {
  int64_t warmup_steps = 200;
  std::optional<double> decay_ratio;  // unset: decay over all steps after warmup
  std::string decay_type = "linear";
  double min_lr_factor = 0.0;
};

struct MetricsConfig {
  int64_t log_freq = 10;
};

struct CheckpointConfig {
  bool enable = false;
  std::string folder = "checkpoint";
  int64_t interval = 500;
  int64_t keep_latest_k = 10;
  bool last_save_model_only = true;
  std::string export_dtype = "float32";
  int64_t load_step = -1;
};

struct ActivationCheckpointConfig {
  std::string mode = "selective";
  std::string selective_ac_option = "2";
  bool preserve_rng_state = true;
  std::string determinism_check = "default";
  bool debug = false;
};

struct DebugConfig {
  std::optional<int64_t> seed;  // unset: drawn at start and logged
  bool deterministic = false;
  bool deterministic_warn_only = false;
  int64_t fingerprint_freq = 1;         // parameter checksum in fingerprint.log every N steps
  std::string numerics_trace = "none";  // numerics.log: "none", "blocks" or "ops"
  int64_t numerics_freq = 1;            // numerics.log records every N steps
};

struct Config {
  JobConfig job;
  ModelConfig model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  LRSchedulerConfig lr_scheduler;
  MetricsConfig metrics;
  CheckpointConfig checkpoint;
  ActivationCheckpointConfig activation_checkpoint;
  DebugConfig debug;
};

}  // namespace titan

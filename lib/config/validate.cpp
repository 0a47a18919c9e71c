// Checks that involve more than one key, or values a single key's bounds cannot express.
#include <fmt/format.h>

#include "config/loader.h"
#include "util/error.h"

namespace titan {
namespace {

void check_batch(const TrainingConfig& t) {
  if (t.global_batch_size == -1) return;
  if (t.global_batch_size < 1) {
    throw ConfigError("training.global_batch_size",
                      fmt::format("must be -1 or a positive integer, got {}", t.global_batch_size));
  }
  if (t.global_batch_size % t.local_batch_size != 0) {
    throw ConfigError("training.global_batch_size",
                      fmt::format("{} is not a multiple of training.local_batch_size = {}",
                                  t.global_batch_size, t.local_batch_size),
                      "gradient accumulation needs global_batch_size = local_batch_size x N");
  }
}

void check_dataset(const TrainingConfig& t) {
  if (t.dataset != "synthetic" && t.dataset_path.empty()) {
    throw ConfigError("training.dataset_path",
                      fmt::format("dataset \"{}\" needs a dataset_path", t.dataset),
                      "set training.dataset_path to a file or folder, or use dataset = "
                      "\"synthetic\"");
  }
}

void check_activation_checkpoint(const ActivationCheckpointConfig& ac) {
  if (ac.mode != "selective") return;  // the option only means something for selective
  if (ac.selective_ac_option == "op") {
    throw ConfigError("activation_checkpoint.selective_ac_option",
                      "\"op\" (op-level selective activation checkpointing) is not supported",
                      "use a positive integer N to checkpoint every Nth block, or mode = \"full\"");
  }
  bool digits = !ac.selective_ac_option.empty() &&
                ac.selective_ac_option.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoll(ac.selective_ac_option) < 1) {
    throw ConfigError("activation_checkpoint.selective_ac_option",
                      fmt::format("\"{}\" is not a positive integer", ac.selective_ac_option),
                      "write selective_ac_option = \"2\" to checkpoint every 2nd block");
  }
}

void check_checkpoint(const CheckpointConfig& c) {
  if (c.keep_latest_k == 1) {
    throw ConfigError("checkpoint.keep_latest_k", "1 is not allowed",
                      "keep at least 2 checkpoints (a save can be interrupted), or 0 for all");
  }
  if (c.enable) {
    throw ConfigError("checkpoint.enable",
                      "checkpoint save/resume is not available in this version of titan-train",
                      "set checkpoint.enable = false");
  }
}

// Both record a block's ops with the thread's one op tracer (see lib/ac/op_trace.h).
void check_numerics_trace(const Config& c) {
  const auto& ac = c.activation_checkpoint;
  if (c.debug.numerics_trace == "ops" && ac.mode != "none" && ac.determinism_check != "none") {
    throw ConfigError("debug.numerics_trace",
                      fmt::format("\"ops\" cannot be combined with activation checkpointing "
                                  "(mode \"{}\") and its recompute checker (determinism_check "
                                  "\"{}\"): both trace the ops of a block",
                                  ac.mode, ac.determinism_check),
                      "set activation_checkpoint.mode = \"none\" (or determinism_check = "
                      "\"none\"), or use numerics_trace = \"blocks\"");
  }
}

}  // namespace

void validate(const Config& config) {
  check_batch(config.training);
  check_dataset(config.training);
  check_activation_checkpoint(config.activation_checkpoint);
  check_checkpoint(config.checkpoint);
  check_numerics_trace(config);
}

}  // namespace titan

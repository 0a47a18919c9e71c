// Checks that involve more than one key, or values a single key's bounds cannot express.
#include <fmt/format.h>

#include <optional>

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
  if (t.dataset != DatasetKind::kSynthetic && t.dataset_path.empty()) {
    throw ConfigError("training.dataset_path",
                      fmt::format("dataset \"{}\" needs a dataset_path", to_string(t.dataset)),
                      "set training.dataset_path to a file or folder, or use dataset = "
                      "\"synthetic\"");
  }
}

// "1".."999999": longer digit strings are refused before they can overflow.
std::optional<int64_t> parse_period(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t value = std::stoll(text);
  if (value < 1) return std::nullopt;
  return value;
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

}  // namespace

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
    case AcMode::kSelective:
      break;
  }
  if (ac.selective_ac_option == "op") {
    throw ConfigError("activation_checkpoint.selective_ac_option",
                      "\"op\" (op-level selective activation checkpointing) is not supported",
                      "use a positive integer N to checkpoint every Nth block, or mode = \"full\"");
  }
  if (auto period = parse_period(ac.selective_ac_option)) return *period;
  throw ConfigError(
      "activation_checkpoint.selective_ac_option",
      fmt::format("\"{}\" is not a positive integer (1 to 999999)", ac.selective_ac_option),
      "write selective_ac_option = \"2\" to checkpoint every 2nd block");
}

void validate(const Config& config) {
  check_batch(config.training);
  check_dataset(config.training);
  ac_block_period(config.activation_checkpoint);
  check_checkpoint(config.checkpoint);
}

}  // namespace titan

#include "train/checkpointer.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "config/loader.h"
#include "config/schema.h"
#include "determinism/rng_state.h"
#include "distributed/process_group.h"
#include "metrics/fingerprint.h"
#include "util/error.h"
#include "util/files.h"
#include "util/memory_limit.h"
#include "util/stop_signal.h"
#include "util/strings.h"

namespace titan {
namespace {

const char* signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

std::string steps_list(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "none";
  return join_integers(steps, ", ");
}

// The hashed keys whose values differ from those the checkpoint was saved with.
std::vector<std::string> changed_keys(const std::string& saved_toml, const std::string& source,
                                      const Config& current) {
  Config saved;
  try {
    apply_toml(saved, saved_toml, source);
  } catch (const std::exception& e) {
    return {fmt::format("(its config.toml cannot be read: {})", e.what())};
  }
  std::vector<std::string> out;
  for (const auto& d : config_differences(saved, current)) {
    if (d.hashed) out.push_back(fmt::format("{} {} -> {}", d.key, d.a, d.b));
  }
  return out;
}

}  // namespace

Checkpointer::Checkpointer(const Config& config, ProcessGroup& group, Transformer& model,
                           torch::optim::AdamW& optimizer, const StepBatches& batches)
    : config_(config),
      group_(group),
      model_(model),
      optimizer_(optimizer),
      batches_(batches),
      run_folder_(config),
      folder_(run_folder_.subfolder(RunSubfolder::kCheckpoint)) {}

StartPoint Checkpointer::resume_or_initialize() {
  StartPoint start;
  const auto& c = config_.checkpoint;
  if (c.enable) {
    const CheckpointListing listing = list_checkpoints(folder_);
    for (const auto& w : listing.warnings) start.notes.push_back("warning: " + w);
    const auto& steps = listing.steps;
    if (c.load_step >= 0) {
      if (std::find(steps.begin(), steps.end(), c.load_step) == steps.end()) {
        throw ConfigError("checkpoint.load_step",
                          fmt::format("{} has no complete checkpoint step-{} (complete: {})",
                                      folder_, c.load_step, steps_list(steps)),
                          "pick one of those, or -1 for the latest");
      }
      resume_from(c.load_step, start);
      return start;
    }
    // Rank 0's listing decides, so that the ranks resume from the same step.
    const std::string latest =
        group_.broadcast("resume_step", steps.empty() ? "none" : std::to_string(steps.back()));
    if (latest != "none") {
      resume_from(std::stoll(latest), start);
      return start;
    }
  }
  if (!c.initial_load_path.empty()) load_initial_weights(c.initial_load_path, start);
  return start;
}

void Checkpointer::resume_from(int64_t step, StartPoint& start) {
  const std::string path = folder_ + "/" + checkpoint_folder_name(step);
  const auto load_start = std::chrono::steady_clock::now();
  // A global data order has one position for all ranks: each takes rank 0's state.
  const CheckpointContents c = load_checkpoint(path, batches_.saved_rank_to_load());
  if (!c.model_only) batches_.check_resumable(c.world_size, c.global_data_order, path);
  check_parameters_match(*model_, c.model, path,
                         "the checkpoint was saved for another model shape: restore the model "
                         "keys of its config.toml, or use another checkpoint.folder");
  if (c.step > config_.training.steps) {
    throw ConfigError("training.steps",
                      fmt::format("{} is below the step of the checkpoint to resume ({})",
                                  config_.training.steps, path),
                      "raise training.steps, or pick an earlier checkpoint.load_step");
  }
  if (c.model_only && c.step < config_.training.steps) {
    throw ConfigError(path,
                      "a model-only checkpoint (checkpoint.last_save_model_only) cannot resume "
                      "training: it has no optimizer or data state",
                      "resume from a full checkpoint (checkpoint.load_step), or start from its "
                      "weights at step 0 with checkpoint.initial_load_path");
  }
  if (c.model_only) {
    load_parameters(*model_, c.model);
    start.step = c.step;
    start.notes.push_back(
        fmt::format("checkpoint: {} is the run's final save: nothing to train", path));
    return;
  }
  restore_full_checkpoint(c, path + "/optimizer.safetensors", *model_, optimizer_);
  start.step = c.state.step;
  start.state = c.state;
  last_saved_step_ = start.step;
  start.notes.push_back(fmt::format(
      "checkpoint: resumed from {} (step {}), loaded in {:.2f} s", path, start.step,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count()));
  if (c.config_hash != config_hash(config_)) {
    // The config's hyperparameters win over the saved ones; the lr follows the schedule anyway.
    for (auto& group : optimizer_.param_groups()) {
      auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
      o.betas({config_.optimizer.beta1, config_.optimizer.beta2})
          .eps(config_.optimizer.eps)
          .weight_decay(config_.optimizer.weight_decay);
    }
    auto keys = changed_keys(c.config_toml, path + "/config.toml", config_);
    start.notes.push_back(fmt::format(
        "warning: {} was saved with another config; changed: {}; the new values apply from "
        "step {}",
        path,
        keys.empty() ? "(no key: another titan-train version)"
                     : fmt::format("{}", fmt::join(keys, ", ")),
        start.step + 1));
  }
}

void Checkpointer::load_initial_weights(const std::string& path, StartPoint& start) {
  const char* key = "checkpoint.initial_load_path";
  const std::string hint =
      "initial_load_path names a .safetensors file or a checkpoint folder (step-N) holding this "
      "model's parameters under torchtitan's names";
  std::vector<NamedTensor> tensors;
  std::error_code ec;
  std::string source = path;
  try {
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::string> warnings;
      source = resolve_step_folder(path, warnings);
      for (const auto& w : warnings) start.notes.push_back("warning: " + w);
      tensors = load_checkpoint(source).model;
    } else {
      const auto max_bytes = static_cast<uint64_t>(process_memory_limit().bytes);
      tensors = parse_safetensors(read_file(path, max_bytes), path).tensors;
    }
  } catch (const std::system_error& e) {
    throw ConfigError(key, fmt::format("{}: {}", path, e.code().message()), hint);
  } catch (const RuntimeFailure& e) {
    throw ConfigError(key, e.what(), e.hint().empty() ? hint : e.hint());
  }
  check_parameters_match(*model_, tensors, source, hint);
  load_parameters(*model_, tensors);
  start.notes.push_back(fmt::format("initial weights from {} ({} tensors); step 0, fresh optimizer",
                                    source, tensors.size()));
}

bool Checkpointer::due(int64_t step) const {
  const auto& c = config_.checkpoint;
  return c.enable && (step % c.interval == 0 || step == config_.training.steps);
}

void Checkpointer::save(const TrainState& state, bool final_save, std::ostream& console) {
  const auto& c = config_.checkpoint;
  const bool model_only = final_save && c.last_save_model_only;
  const int64_t step = state.step;
  std::vector<TrainState> other_rank_states;
  if (group_.size() > 1 && !model_only) {
    // Parameters and optimizer state are replicated: rank 0 saves them with every rank's state.
    const auto states =
        group_.gather(fmt::format("train_state/{}", ++exchanges_), encode_train_state(state));
    for (size_t r = 1; r < states.size(); ++r) {
      other_rank_states.push_back(
          decode_train_state(states[r], fmt::format("rank {}'s train state", r)));
    }
  }
  if (group_.rank() != 0) {
    last_saved_step_ = step;
    return;
  }
  CheckpointContents contents;
  if (model_only) {
    contents.model = parameters_as(named_parameters(*model_), export_scalar_type(c.export_dtype));
  } else {
    contents = full_checkpoint(*model_, optimizer_, state);
  }
  contents.other_rank_states = std::move(other_rank_states);
  contents.world_size = group_.size();
  contents.global_data_order = batches_.global_order();
  contents.step = step;
  contents.model_only = model_only;
  contents.config_hash = config_hash(config_);
  contents.config_toml = to_toml(config_);
  // A relative checkpoint folder is titan-train's own, inside the dump folder: a link planted
  // there is refused. An absolute one is the user's to point anywhere.
  run_folder_.make(RunSubfolder::kCheckpoint);
  SaveRecord record;
  try {
    record = save_checkpoint(folder_, contents, [] { return stop_signal_count() >= 2; });
  } catch (const WriteAborted&) {
    const auto steps = list_checkpoints(folder_).steps;
    throw StoppedBySignal(
        pending_stop_signal(),
        fmt::format("a second {} aborted the save of step-{}; the complete checkpoints are "
                    "untouched (latest: {})",
                    signal_name(pending_stop_signal()), step,
                    steps.empty() ? "none" : checkpoint_folder_name(steps.back())));
  }
  last_saved_step_ = step;
  const auto removed = prune_checkpoints(folder_, c.keep_latest_k);
  console << fmt::format("[titan] checkpoint: saved {} ({}, {:.1f} MiB) in {:.2f} s{}\n",
                         record.path, model_only ? "model only" : "full",
                         static_cast<double>(record.bytes) / (1 << 20), record.seconds,
                         removed.empty() ? "" : "; removed steps " + steps_list(removed));
  console.flush();
}

bool Checkpointer::stop_requested(int64_t step, const std::function<TrainState()>& state,
                                  std::ostream& console) {
  int signal = pending_stop_signal();
  // Ranks stop together, at the same step, even when the signal reached only some of them.
  if (group_.size() > 1 &&
      group_.any_rank(signal != 0, fmt::format("the stop check after step {}", step)) &&
      signal == 0) {
    signal = SIGTERM;
  }
  if (signal == 0) return false;
  if (!config_.checkpoint.enable) {
    throw StoppedBySignal(
        signal, step == 0 ? fmt::format("stopped by {} before step 1", signal_name(signal))
                          : fmt::format("stopped by {} after step {}; "
                                        "metrics.jsonl and fingerprint.log "
                                        "are complete up to it",
                                        signal_name(signal), step));
  }
  if (step > 0 && last_saved_step_ != step) save(state(), false, console);
  console << fmt::format("[titan] stopped by {} after step {}{}\n", signal_name(signal), step,
                         step > 0 ? fmt::format("; checkpoint step-{} is saved: run the same "
                                                "command to resume",
                                                step)
                                  : "");
  return true;
}

}  // namespace titan

#include "train/checkpointer.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
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
#include "util/stopwatch.h"
#include "util/strings.h"

namespace titan {
namespace {

std::string steps_list(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "none";
  return join_integers(steps, ", ");
}

}  // namespace

Checkpointer::Checkpointer(const Config& config, ProcessGroup& group, Model& model,
                           torch::optim::AdamW& optimizer, const StepBatches& batches,
                           CheckpointLayout layout)
    : config_(config),
      group_(group),
      model_(model),
      optimizer_(optimizer),
      batches_(batches),
      run_folder_(config),
      folder_(run_folder_.subfolder(RunSubfolder::kCheckpoint)),
      layout_(std::move(layout)) {}

bool Checkpointer::saves() const {
  return config_.checkpoint.enable && !config_.checkpoint.load_only;
}

void Checkpointer::save_seed(const TrainState& state, std::ostream& console) {
  save(state, true, console);
}

bool Checkpointer::due(int64_t step) const {
  const auto& c = config_.checkpoint;
  if (!saves()) return false;
  return step % c.interval == 0 || step == config_.training.steps ||
         (step == 1 && c.enable_first_step_checkpoint);
}

void Checkpointer::refuse_saves_onto_skipped(int64_t start_step) const {
  if (!saves()) return;
  const auto& c = config_.checkpoint;
  const int64_t last = config_.training.steps;
  if (c.last_save_model_only && c.last_save_in_hf && start_step < last) {
    const std::string path = folder_ + "/" + checkpoint_folder_name(last);
    try {
      check_hf_checkpoint_target(path, true);
    } catch (const ConfigError& e) {
      throw ConfigError(e.where(),
                        fmt::format("{}; the final Hugging Face save of step {} "
                                    "(checkpoint.last_save_in_hf) would go there",
                                    e.message(), last),
                        "move it out of the checkpoint folder before training, or set "
                        "checkpoint.last_save_in_hf = false");
    }
  }
  for (const int64_t step : list_checkpoints(folder_).skipped_steps) {
    if (step <= start_step || step > config_.training.steps || !due(step)) continue;
    const std::string path = folder_ + "/" + checkpoint_folder_name(step);
    throw ConfigError(path,
                      fmt::format("the save of step {} would replace it, and it is not a "
                                  "checkpoint (the start-up listing skipped it)",
                                  step),
                      "move it out of the checkpoint folder: a save replaces only the "
                      "checkpoints titan-train wrote");
  }
}

void Checkpointer::save(const TrainState& state, bool final_save, std::ostream& console) {
  const bool model_only = final_save && config_.checkpoint.last_save_model_only;
  if (layout_.saves.shard && !model_only) {
    save_sharded(state, console);
    return;
  }
  if (!layout_.saves.gather) {
    save_whole(state, final_save, console);
    return;
  }
  layout_.saves.gather();
  try {
    save_whole(state, final_save, console);
  } catch (...) {
    layout_.saves.release();
    throw;
  }
  layout_.saves.release();
}

std::function<bool()> Checkpointer::abort_on_second_signal() {
  const int before = stop_signal_count();
  return [before] {
    const int now = stop_signal_count();
    return now >= 2 && now > before;
  };
}

StoppedBySignal Checkpointer::aborted_save(int64_t step, const std::string& where) const {
  const int signal = pending_stop_signal() != 0 ? pending_stop_signal() : SIGTERM;
  const auto steps = list_checkpoints(folder_).steps;
  return StoppedBySignal(
      signal, fmt::format("a second {} aborted the save of step-{}{}; the complete checkpoints "
                          "are untouched (latest: {})",
                          stop_signal_name(signal), step, where,
                          steps.empty() ? "none" : checkpoint_folder_name(steps.back())));
}

void Checkpointer::report_saved(const SaveRecord& record, const std::string& kind,
                                std::ostream& console) {
  const auto removed = prune_checkpoints(folder_, config_.checkpoint.keep_latest_k);
  console << fmt::format("[titan] checkpoint: saved {} ({}, {:.1f} MiB) in {:.2f} s{}\n",
                         record.path, kind, static_cast<double>(record.bytes) / (1 << 20),
                         record.seconds,
                         removed.empty() ? "" : "; removed steps " + steps_list(removed));
  console.flush();
}

void Checkpointer::save_whole(const TrainState& state, bool final_save, std::ostream& console) {
  const auto& c = config_.checkpoint;
  const bool model_only = final_save && c.last_save_model_only;
  const int64_t step = state.step;
  std::vector<TrainState> other_rank_states;
  if (group_.size() > 1 && !model_only) {
    // Parameters and optimizer state are whole on every rank (replicated): rank 0 saves them
    // with every rank's state.
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
  // A relative checkpoint folder is titan-train's own, inside the dump folder: a link planted
  // there is refused. An absolute one is the user's to point anywhere.
  run_folder_.make(RunSubfolder::kCheckpoint);
  if (model_only && c.last_save_in_hf) {
    const SaveRecord record = save_hf(step);
    last_saved_step_ = step;
    console << fmt::format(
        "[titan] checkpoint: saved {} (model only, Hugging Face layout, {:.1f} MiB) in {:.2f} s\n",
        record.path, static_cast<double>(record.bytes) / (1 << 20), record.seconds);
    console.flush();
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
  SaveRecord record;
  try {
    record = save_checkpoint(folder_, contents, abort_on_second_signal());
  } catch (const WriteAborted&) {
    throw aborted_save(step, "");
  }
  last_saved_step_ = step;
  report_saved(record, model_only ? "model only" : "full", console);
}

SaveRecord Checkpointer::save_hf(int64_t step) {
  const auto start = SteadyClock::now();
  HfWriteOptions options;
  options.dtype = export_scalar_type(config_.checkpoint.export_dtype);
  options.tie_if_equal = hf_ties_embeddings(config_.model.name, config_.model.flavor);
  // A rerun that reaches the same last step replaces its own earlier Hugging Face save, as a
  // titan-train checkpoint of that step would be replaced.
  options.replace = true;
  const std::string path = folder_ + "/" + checkpoint_folder_name(step);
  HfWriteRecord written;
  try {
    written = write_hf_checkpoint(path, named_parameters(*model_), model_->args(), options,
                                  abort_on_second_signal());
  } catch (const WriteAborted&) {
    throw StoppedBySignal(pending_stop_signal(),
                          fmt::format("a second {} aborted the Hugging Face save of step-{}",
                                      stop_signal_name(pending_stop_signal()), step));
  }
  SaveRecord record;
  record.path = written.path;
  record.bytes = written.bytes;
  record.seconds = seconds_since(start);
  return record;
}

bool Checkpointer::stop_requested(int64_t step, const std::function<TrainState()>& state,
                                  std::ostream& console) {
  // Ranks stop together, at the same step, even when the signal reached only some of them.
  const int signal = agreed_stop_signal(group_, fmt::format("the stop check after step {}", step));
  if (signal == 0) return false;
  if (!saves()) {
    throw StoppedBySignal(signal, step == 0
                                      ? fmt::format("stopped by {} during start-up, before step 1",
                                                    stop_signal_name(signal))
                                      : fmt::format("stopped by {} after step {}; "
                                                    "metrics.jsonl and fingerprint.log "
                                                    "are complete up to it",
                                                    stop_signal_name(signal), step));
  }
  if (step > 0 && last_saved_step_ != step) save(state(), false, console);
  console << fmt::format("[titan] stopped by {} after step {}{}\n", stop_signal_name(signal), step,
                         step > 0 ? fmt::format("; checkpoint step-{} is saved: run the same "
                                                "command to resume",
                                                step)
                                  : "");
  return true;
}

}  // namespace titan

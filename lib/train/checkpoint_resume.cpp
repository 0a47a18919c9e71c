// Where a run starts (Checkpointer::resume_or_initialize): the latest checkpoint, or
// checkpoint.load_step, less what checkpoint.exclude_from_loading leaves out; a step-0 seed
// checkpoint; or checkpoint.initial_load_path (weights only, or a checkpoint's whole state with
// initial_load_model_only = false).
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "config/loader.h"
#include "config/schema.h"
#include "metrics/fingerprint.h"
#include "train/checkpointer.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/memory_limit.h"
#include "util/stopwatch.h"
#include "util/strings.h"

namespace titan {
namespace {

// tensors_checksum of loaded weights, in the order loaded.
uint64_t checksum_of(const std::vector<NamedTensor>& tensors) {
  std::vector<at::Tensor> values;
  for (const auto& t : tensors) values.push_back(t.tensor);
  return tensors_checksum(values);
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

bool Checkpointer::excluded(const std::string& part) const {
  const auto& parts = config_.checkpoint.exclude_from_loading;
  return std::find(parts.begin(), parts.end(), part) != parts.end();
}

StartPoint Checkpointer::resume_or_initialize() {
  StartPoint start;
  const auto& c = config_.checkpoint;
  if (c.enable && !c.create_seed_checkpoint) {
    const CheckpointListing listing = list_checkpoints(folder_);
    for (const auto& w : listing.warnings) start.notes.push_back("warning: " + w);
    const auto& steps = listing.steps;
    if (c.load_step >= 0) {
      if (std::find(steps.begin(), steps.end(), c.load_step) == steps.end()) {
        throw ConfigError(
            "checkpoint.load_step",
            fmt::format("{} has no complete checkpoint step-{} (complete: {})", folder_,
                        c.load_step, steps.empty() ? "none" : join_integers(steps, ", ")),
            "pick one of those, or -1 for the latest");
      }
      resume_from(folder_ + "/" + checkpoint_folder_name(c.load_step), start);
      return start;
    }
    // Rank 0's listing decides, so that the ranks resume from the same step.
    const std::string latest =
        group_.broadcast("resume_step", steps.empty() ? "none" : std::to_string(steps.back()));
    if (latest != "none") {
      resume_from(folder_ + "/" + checkpoint_folder_name(std::stoll(latest)), start);
      return start;
    }
  }
  if (c.initial_load_in_hf) {
    load_initial_hf_weights(
        c.initial_load_path.empty() ? config_.model.hf_assets_path : c.initial_load_path, start);
    return start;
  }
  if (c.initial_load_path.empty()) return start;
  if (!c.initial_load_model_only) {
    std::vector<std::string> warnings;
    const std::string path = resolve_step_folder(c.initial_load_path, warnings);
    for (const auto& w : warnings) start.notes.push_back("warning: " + w);
    resume_from(path, start);
    start.notes.push_back(
        fmt::format("checkpoint.initial_load_model_only = false: the whole state of {} was "
                    "loaded, step included",
                    path));
    return start;
  }
  load_initial_weights(c.initial_load_path, start);
  return start;
}

void Checkpointer::resume_from(const std::string& path, StartPoint& start) {
  if (is_hf_checkpoint_folder(path)) {
    resume_from_hf_final_save(path, start);
    return;
  }
  const auto load_start = SteadyClock::now();
  // A global data order has one position for all ranks: each takes rank 0's state.
  const CheckpointContents c = load_checkpoint(path, batches_.saved_rank_to_load(), layout_.rows);
  const bool seed = c.model_only && c.step == 0;
  if (!c.model_only && !excluded("dataloader"))
    batches_.check_resumable(c.world_size, c.global_data_order, path);
  check_parameters_match(*model_, whole_model_shapes(c), path,
                         "the checkpoint was saved for another model shape: restore the model "
                         "keys of its config.toml, or use another checkpoint.folder");
  if (c.step > config_.training.steps && !excluded("train_state")) {
    throw ConfigError("training.steps",
                      fmt::format("{} is below the step of the checkpoint to resume ({})",
                                  config_.training.steps, path),
                      "raise training.steps, or pick an earlier checkpoint.load_step");
  }
  if (c.model_only && !seed && c.step < config_.training.steps) {
    throw ConfigError(path,
                      "a model-only checkpoint (checkpoint.last_save_model_only) cannot resume "
                      "training: it has no optimizer or data state",
                      "resume from a full checkpoint (checkpoint.load_step), or start from its "
                      "weights at step 0 with checkpoint.initial_load_path");
  }
  if (c.model_only) {
    if (!excluded("model")) load_model(c);
    start.step = c.step;
    start.notes.push_back(seed ? fmt::format("checkpoint: {} is a seed checkpoint: its weights, "
                                             "step 0, a fresh optimizer",
                                             path)
                               : fmt::format("checkpoint: {} is the run's final save: nothing to "
                                             "train",
                                             path));
    return;
  }
  restore_parts(c, path, start);
  start.notes.push_back(fmt::format(
      "checkpoint: resumed from {} (step {}{}), loaded in {:.2f} s", path, c.state.step,
      config_.checkpoint.exclude_from_loading.empty()
          ? ""
          : "; not loaded: " +
                fmt::format("{}", fmt::join(config_.checkpoint.exclude_from_loading, ", ")),
      seconds_since(load_start)));
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

void Checkpointer::restore_parts(const CheckpointContents& c, const std::string& path,
                                 StartPoint& start) {
  const std::string optimizer_source = path + "/" + c.optimizer_file;
  if (excluded("optimizer") || layout_.rows.shards > 0) {
    if (!excluded("model")) load_model(c);
    if (!excluded("optimizer")) {
      // FSDP: this rank's rows of the moments, for the sharded optimizer.
      std::vector<NamedSizes> shapes;
      for (const auto& p : named_parameters(*model_))
        shapes.push_back({p.name, p.tensor.sizes().vec()});
      start.optimizer_rows = adamw_param_states(c, shapes, optimizer_source);
    }
  } else {
    // The optimizer's state comes with the weights; kept weights are put back after it.
    std::vector<at::Tensor> kept;
    if (excluded("model")) {
      for (const auto& p : model_->parameters()) kept.push_back(p.detach().clone());
    }
    restore_full_checkpoint(c, optimizer_source, *model_, optimizer_);
    if (excluded("model")) {
      at::NoGradGuard no_grad;
      auto params = model_->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(kept[i]);
    }
  }
  TrainState state = c.state;
  if (excluded("dataloader")) state.loader = LoaderState{};
  if (excluded("train_state")) {
    state.step = 0;
    state.tokens_seen = 0;
  } else if (excluded("lr_scheduler")) {
    start.schedule_origin = state.step;  // the schedule starts again at the resumed step
  }
  start.step = state.step;
  start.state = state;
  last_saved_step_ = start.step;
}

void Checkpointer::resume_from_hf_final_save(const std::string& path, StartPoint& start) {
  const int64_t step = step_of_folder_name(std::filesystem::path(path).filename().string());
  if (step < config_.training.steps) {
    throw ConfigError(path,
                      "a Hugging Face checkpoint (checkpoint.last_save_in_hf) holds the model "
                      "only and cannot resume training",
                      "resume from a full checkpoint (checkpoint.load_step), or start from its "
                      "weights at step 0 with checkpoint.initial_load_in_hf and "
                      "initial_load_path");
  }
  HfLoadReport report;
  load_hf_rows(path, report);
  start.step = step;
  start.notes.push_back(fmt::format(
      "checkpoint: {} is the run's final save (Hugging Face layout): nothing to train", path));
}

void Checkpointer::load_initial_hf_weights(const std::string& path, StartPoint& start) {
  const auto load_start = SteadyClock::now();
  HfLoadReport report;
  load_hf_rows(path, report);
  for (const auto& note : report.notes) start.notes.push_back("checkpoint: " + note);
  start.notes.push_back(fmt::format(
      "initial weights from the Hugging Face checkpoint {} ({} file(s), {:.1f} MiB read{}) in "
      "{:.2f} s; step 0, fresh optimizer",
      path, report.files.size(), static_cast<double>(report.bytes) / (1 << 20),
      report.tied ? ", tied embeddings" : "", seconds_since(load_start)));
}

void Checkpointer::load_model(const std::vector<NamedTensor>& tensors, uint64_t checksum,
                              RowShare kept, const std::vector<int64_t>& total_rows) {
  loaded_checksum_ = checksum;
  if (!layout_.load) {
    load_parameters(*model_, tensors);
    return;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t first = kept.shards > 0 ? kept.rows_of(total_rows.at(i)).begin : 0;
    layout_.load(tensors[i].name, first, tensors[i].tensor);
  }
}

void Checkpointer::load_model(const CheckpointContents& c) {
  load_model(c.model, c.files_checksum, c.model_rows, c.model_total_rows);
}

void Checkpointer::load_hf_rows(const std::string& path, HfLoadReport& report) {
  const auto tensors =
      load_hf_checkpoint(path, model_->args(), parameter_dtype(), &report, layout_.rows);
  std::vector<int64_t> total_rows;
  for (const auto& p : model_parameter_shapes(model_->args())) {
    total_rows.push_back(p.sizes.empty() ? 1 : p.sizes[0]);
  }
  // Ranks that keep rows apart cannot hash the same tensors: they compare the files' headers.
  load_model(tensors, layout_.rows.shards > 0 ? report.headers_checksum : checksum_of(tensors),
             layout_.rows, total_rows);
}

at::ScalarType Checkpointer::parameter_dtype() const {
  return model_->parameters().front().scalar_type();
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
  load_model(tensors, checksum_of(tensors));
  start.notes.push_back(fmt::format("initial weights from {} ({} tensors); step 0, fresh optimizer",
                                    source, tensors.size()));
}

}  // namespace titan

// Checkpointer::save_sharded: a full checkpoint under FSDP, each shard written by the rank that
// holds it (contract in checkpointer.h; the files in lib/checkpoint/sharded_checkpoint.h).
//
//   1. every rank's TrainState to rank 0; rank 0 makes the temporary folder (broadcast: ready)
//   2. each shard writer writes its model and optimizer shard files there, and every rank tells
//      rank 0 what it wrote, or why not
//   3. rank 0 writes the train states, config.toml and the manifest and renames the folder into
//      place, or removes it when any rank failed; it tells every rank the outcome (broadcast)
//
// So the step-N folder is complete or absent, as for a whole save, and every rank returns or
// throws together. A rank killed outright cannot clean up: rank 0 removes the folder when the
// gather of step 2 names the rank gone; were rank 0 the one killed, the next save into the
// folder removes it (begin_checkpoint_write removes stale temporary folders).
#include <fmt/format.h>

#include <exception>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/sharded_checkpoint.h"
#include "config/loader.h"
#include "config/schema.h"
#include "metrics/fingerprint.h"
#include "train/checkpointer.h"
#include "util/error.h"
#include "util/stop_signal.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

using Status = ShardWriteOutcome::Status;

}  // namespace

void Checkpointer::save_sharded(const TrainState& state, std::ostream& console) {
  const auto start = SteadyClock::now();
  const auto should_abort = abort_on_second_signal();
  const int64_t step = state.step;
  const auto states =
      group_.gather(fmt::format("train_state/{}", ++exchanges_), encode_train_state(state));
  std::exception_ptr begin_failure;
  std::string began;
  if (group_.rank() == 0) {
    try {
      run_folder_.make(RunSubfolder::kCheckpoint);
      begin_checkpoint_write(folder_, step);
    } catch (const std::exception& e) {
      begin_failure = std::current_exception();
      began = e.what();
    }
  }
  began = group_.broadcast(fmt::format("save_begin/{}", ++exchanges_), began);
  if (begin_failure) std::rethrow_exception(begin_failure);
  if (!began.empty()) {
    throw RuntimeFailure(
        fmt::format("rank 0 could not start the save of step-{}: {}", step, began));
  }

  ShardWriteOutcome mine;
  if (layout_.saves.writes) {
    try {
      mine.files = write_checkpoint_shard(checkpoint_temp_folder(folder_, step),
                                          layout_.saves.shard(), should_abort);
    } catch (const WriteAborted&) {
      mine.status = Status::kAborted;
    } catch (const std::exception& e) {
      mine.status = Status::kFailed;
      mine.message = e.what();
    }
  }
  std::vector<std::string> outcomes;
  try {
    outcomes =
        group_.gather(fmt::format("save_shards/{}", ++exchanges_), encode_shard_outcome(mine));
  } catch (...) {  // a rank gone mid-save (killed): its partial files must not stay behind
    if (group_.rank() == 0) abandon_checkpoint_write(folder_, step);
    throw;
  }
  std::string outcome;
  if (group_.rank() == 0) {
    try {
      outcome = finish_sharded_save(state, states, outcomes, start, should_abort, console);
    } catch (const std::exception& e) {  // a rank's report unreadable: the others must hear it
      abandon_checkpoint_write(folder_, step);
      outcome = fmt::format("failed\nrank 0: {}", e.what());
    }
  }
  outcome = group_.broadcast(fmt::format("save_end/{}", ++exchanges_), outcome);
  if (outcome.empty()) {
    last_saved_step_ = step;
    return;
  }
  const auto newline = outcome.find('\n');
  const std::string where = outcome.substr(newline + 1);
  if (outcome.compare(0, newline, "aborted") == 0) throw aborted_save(step, " on " + where);
  throw RuntimeFailure(fmt::format("the save of step-{} failed on {}", step, where),
                       "the complete checkpoints are untouched");
}

std::string Checkpointer::finish_sharded_save(const TrainState& state,
                                              const std::vector<std::string>& states,
                                              const std::vector<std::string>& outcomes,
                                              SteadyClock::time_point start,
                                              const std::function<bool()>& should_abort,
                                              std::ostream& console) {
  const int64_t step = state.step;
  std::vector<CheckpointFile> files;
  std::string failed;
  for (size_t r = 0; r < outcomes.size() && failed.empty(); ++r) {
    const auto o = decode_shard_outcome(outcomes[r], fmt::format("rank {}'s save", r));
    if (o.status == Status::kAborted) failed = fmt::format("aborted\nrank {}", r);
    if (o.status == Status::kFailed) failed = fmt::format("failed\nrank {}: {}", r, o.message);
    files.insert(files.end(), o.files.begin(), o.files.end());
  }
  if (!failed.empty()) {
    abandon_checkpoint_write(folder_, step);
    return failed;
  }
  CheckpointContents contents;
  contents.step = step;
  contents.state = state;
  for (size_t r = 1; r < states.size(); ++r) {
    contents.other_rank_states.push_back(
        decode_train_state(states[r], fmt::format("rank {}'s train state", r)));
  }
  contents.world_size = group_.size();
  contents.global_data_order = batches_.global_order();
  contents.config_hash = config_hash(config_);
  contents.config_toml = to_toml(config_);
  contents.shards = layout_.saves.shards;
  contents.replicas = layout_.saves.replicas;
  SaveRecord record;
  try {
    record = finish_checkpoint_write(folder_, contents, files, should_abort);
  } catch (const WriteAborted&) {
    return "aborted\nrank 0";
  } catch (const std::exception& e) {
    return fmt::format("failed\nrank 0: {}", e.what());
  }
  record.seconds = seconds_since(start);
  report_saved(record, fmt::format("full, in {} shards", layout_.saves.shards), console);
  return "";
}

}  // namespace titan

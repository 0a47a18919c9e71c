#include "data/step_batches.h"

#include <fmt/format.h>

#include "util/error.h"

namespace titan {

StepBatches::StepBatches(std::shared_ptr<const TokenSource> source, const BatchLayout& layout)
    : layout_(layout),
      loader_(std::move(source), layout.local_batch_size, layout.seq_len,
              layout.global_order ? 0 : layout.rank, layout.global_order ? 1 : layout.world) {}

std::vector<Batch> StepBatches::next_step() {
  const int64_t count = layout_.micro_batches;
  std::vector<Batch> mine;
  if (!layout_.global_order) {
    for (int64_t i = 0; i < count; ++i) mine.push_back(loader_.next());
    return mine;
  }
  for (int64_t i = 0; i < layout_.world * count; ++i) {
    Batch batch = loader_.next();
    if (i / count == layout_.rank) mine.push_back(std::move(batch));
  }
  return mine;
}

void StepBatches::check_resumable(int64_t saved_world, bool saved_global_order,
                                  const std::string& checkpoint) const {
  const bool global = layout_.global_order;
  const int64_t ranks = layout_.world;
  if (global != saved_global_order && (saved_world > 1 || ranks > 1)) {
    throw ConfigError(
        checkpoint,
        fmt::format("saved {} debug.batch_invariant, which this run has {}: its data position "
                    "is {}",
                    saved_global_order ? "with" : "without", global ? "on" : "off",
                    saved_global_order ? "one global position, not each rank's own"
                                       : "each rank's own, not one global position"),
        fmt::format("resume with debug.batch_invariant = {}, or start a new run from its weights "
                    "with checkpoint.initial_load_path = \"{}\"",
                    saved_global_order ? "true" : "false", checkpoint));
  }
  if (saved_world != ranks && !(global && saved_global_order)) {
    throw ConfigError(checkpoint,
                      fmt::format("saved by {} {}, but this run has {}: the data position and "
                                  "RNG state of each rank cannot be split or merged",
                                  saved_world, saved_world == 1 ? "process" : "ranks", ranks),
                      fmt::format("resume with {} processes, or start a new run (another "
                                  "job.dump_folder) from its weights with "
                                  "checkpoint.initial_load_path = \"{}\" (runs with "
                                  "debug.batch_invariant resume on any number of ranks)",
                                  saved_world, checkpoint));
  }
}

}  // namespace titan

#include "instruments/profiler.h"

#include <fmt/format.h>
#include <torch/version.h>

#ifdef TITAN_WITH_CUDA
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/cuda/memory_snapshot.h>
#define TITAN_MEMORY_SNAPSHOT 1
#endif
#endif

#include "util/files.h"

namespace titan {

Profiler::Profiler(const ProfilingConfig& config, const RunFolder& folder, int64_t rank,
                   bool on_cuda)
    : config_(config), folder_(folder), rank_(rank), on_cuda_(on_cuda) {
  if (config_.enable_profiling) recorder_ = make_span_recorder();
#ifdef TITAN_MEMORY_SNAPSHOT
  if (config_.enable_memory_snapshot && on_cuda_) torch::cuda::_record_memory_history(true);
#endif
}

std::string Profiler::describe() const {
  std::string out;
  if (config_.enable_profiling) {
    const int64_t active = config_.profiler_active;
    out = fmt::format(
        "profiling: {} of every N multiple of {} ({} warmup steps before), traces in "
        "{}/iteration_<N>/rank{}_trace.json from {}",
        active == 1 ? std::string("step N") : fmt::format("steps N-{}..N", active - 1),
        config_.profile_freq, config_.profiler_warmup,
        folder_.subfolder(RunSubfolder::kProfileTraces), rank_, recorder_->source());
  }
  if (config_.enable_memory_snapshot) {
    bool written = on_cuda_;
#ifndef TITAN_MEMORY_SNAPSHOT
    written = false;
#endif
    out += fmt::format("{}memory snapshot: {}", out.empty() ? "profiling: " : "; ",
                       written ? fmt::format("CUDA's allocator history every {} steps into {}",
                                             config_.profile_freq,
                                             folder_.subfolder(RunSubfolder::kMemorySnapshots))
                               : "CUDA-only (profiling.enable_memory_snapshot has no CPU "
                                 "allocator snapshot); none written");
  }
  return out;
}

int64_t Profiler::window_end(int64_t step) const {
  const int64_t freq = config_.profile_freq;
  const int64_t end = (step + freq - 1) / freq * freq;  // the next multiple of freq
  return step > end - config_.profiler_active ? end : 0;
}

bool Profiler::wants_step(int64_t step) const {
  if (config_.enable_profiling && window_end(step) > 0) return true;
  return config_.enable_memory_snapshot && on_cuda_ && step % config_.profile_freq == 0;
}

void Profiler::before_step(StepContext& context) {
  if (!config_.enable_profiling || recording_ || window_end(context.step) == 0) return;
  ScopedSeconds timed(cost_.seconds);
  recorder_->start();
  recording_ = true;
}

void Profiler::after_step(StepContext& context, StepOutcome&) {
  const int64_t step = context.step;
  if (recording_ && window_end(step) == step) {
    ScopedSeconds timed(cost_.seconds);
    write_trace(step, recorder_->stop());
    recording_ = false;
    cost_.count += config_.profiler_active;
    context.console << fmt::format("[titan] profiling: trace of steps {}-{} written\n",
                                   step - config_.profiler_active + 1, step);
  }
  if (config_.enable_memory_snapshot && on_cuda_ && step % config_.profile_freq == 0)
    write_memory_snapshot(step);
}

void Profiler::write_trace(int64_t step, const std::vector<TraceSpan>& spans) {
  const std::string folder =
      folder_.make(RunSubfolder::kProfileTraces) + fmt::format("/iteration_{}", step);
  make_output_folder(folder, FolderLink::kRefuse);
  write_file_atomically(fmt::format("{}/rank{}_trace.json", folder, rank_),
                        format_chrome_trace(spans, rank_));
}

void Profiler::write_memory_snapshot(int64_t step) {
#ifdef TITAN_MEMORY_SNAPSHOT
  const std::string folder =
      folder_.make(RunSubfolder::kMemorySnapshots) + fmt::format("/iteration_{}", step);
  make_output_folder(folder, FolderLink::kRefuse);
  write_file_atomically(fmt::format("{}/rank{}_memory_snapshot.pickle", folder, rank_),
                        torch::cuda::_memory_snapshot_pickled());
#else
  (void)step;
#endif
}

std::string Profiler::cost_line(const RunTotals& totals) const {
  if (cost_.count == 0) return "";
  return fmt::format(
      "profiling: {:.1f} ms of recording and writing a profiled step ({} steps), "
      "{:.2f}% of the run",
      1e3 * cost_.per_count(), cost_.count, cost_.percent_of(totals.seconds));
}

}  // namespace titan

// Profiling ([profiling], torchtitan's): for every step N that is a multiple of profile_freq, the
// steps N - profiler_active + 1 .. N are recorded (the profiler_warmup steps before them run
// without recording), and a Chrome / Perfetto trace of them is written after step N to
// <dump_folder>/<save_traces_folder>/iteration_<N>/rank<R>_trace.json: every op as a span
// ("cpu_op") and each transformer block's forward (and its recomputation under activation
// checkpointing) as a span named after it ("user_annotation", "layers.3").
//
// The spans come from libtorch's own profiler (torch::autograd::profiler, the events it
// collects, written as JSON here: Debian's libtorch has no Kineto to write them itself); where
// the build's profiler cannot start, from titan-train's own op recorder (at::RecordFunction
// callbacks). TITAN_PROFILER=titan picks the latter. Profiling reads the run only: the step
// bits do not change.
//
// profiling.enable_memory_snapshot writes CUDA's allocator history as a pickle
// (iteration_<N>/rank<R>_memory_snapshot.pickle in save_memory_snapshot_folder) every
// profile_freq steps; on the CPU the start-up log says it is CUDA-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "config/run_folder.h"
#include "instruments/instrument.h"
#include "util/stopwatch.h"

namespace titan {

// One span of a trace.
struct TraceSpan {
  std::string name;
  std::string category;  // "cpu_op", "user_annotation"
  uint64_t start_us = 0;
  uint64_t duration_us = 0;
  uint64_t thread = 0;
};

// Records spans between start() and stop(); one recorder is live at a time.
class SpanRecorder {
 public:
  virtual ~SpanRecorder() = default;
  virtual void start() = 0;
  virtual std::vector<TraceSpan> stop() = 0;
  virtual const char* source() const = 0;  // "libtorch's profiler", "titan-train's op recorder"
};

// libtorch's profiler, or titan's recorder where it cannot start (or TITAN_PROFILER=titan).
std::unique_ptr<SpanRecorder> make_span_recorder();

// The Chrome trace JSON of `spans` from process `rank`, times relative to the first span.
std::string format_chrome_trace(const std::vector<TraceSpan>& spans, int64_t rank);

class Profiler : public Instrument {
 public:
  Profiler(const ProfilingConfig& config, const RunFolder& folder, int64_t rank, bool on_cuda);

  const char* name() const override { return "profiling"; }
  std::string describe() const override;
  // The warmup and recorded steps of each window.
  bool wants_step(int64_t step) const override;
  void before_step(StepContext& context) override;  // starts a window's recording
  void after_step(StepContext& context, StepOutcome& outcome) override;  // writes its trace
  std::string cost_line(const RunTotals& totals) const override;

 private:
  // The window step `step` belongs to: its last step N (a multiple of profile_freq), or 0.
  int64_t window_end(int64_t step) const;
  void write_trace(int64_t step, const std::vector<TraceSpan>& spans);
  void write_memory_snapshot(int64_t step);

  ProfilingConfig config_;
  RunFolder folder_;
  int64_t rank_ = 0;
  bool on_cuda_ = false;
  std::unique_ptr<SpanRecorder> recorder_;
  bool recording_ = false;
  CostMeter cost_;  // recording and writing, per profiled step
};

}  // namespace titan

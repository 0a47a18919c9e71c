// What a logged step reports, and where it goes: the console line (torchtitan's format) and
// <dump_folder>/metrics.jsonl (one JSON object per logged step, full precision).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/files.h"

namespace titan {

// One part of the model at a logged step: a block ("0", "1", ...), "tok_embeddings", "norm" or
// "output". L2 norms over the part's parameters, in float64.
struct PartNorms {
  std::string name;
  double grad_norm = 0;    // the step's gradient (summed over ranks), before clipping
  double weight_norm = 0;  // the weights after the step
  double update_norm = 0;  // ||w after - w before|| of the step's optimizer update
  double update_ratio() const { return weight_norm > 0 ? update_norm / weight_norm : 0; }
};

// One MoE layer's load at a logged step: tokens per expert over all ranks.
struct ExpertLoadStats {
  std::string name;  // "layers.3.moe"
  double max = 0, mean = 0;
  double max_over_mean() const { return mean > 0 ? max / mean : 0; }
};

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double max_loss = 0;   // the largest rank's own loss (torchtitan's global_max_loss)
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int64_t tokens_seen = 0;
  double memory_gib = 0;  // peak RSS on CPU, max reserved on CUDA, since the last log
  double memory_pct = 0;  // of the device's (or machine's) total
  double tps = 0;         // tokens per second per device since the last log
  double tflops = 0;
  double mfu_pct = 0;
  double step_time_s = 0;  // mean seconds per step since the last log
  // Mean process CPU seconds per step since the last log, in user code and in the kernel
  // (getrusage: all threads; on CUDA, the host's share). metrics.jsonl only.
  double cpu_user_s = 0;
  double cpu_system_s = 0;
  // Mean minor page faults per step since the last log (getrusage), the cost glibc malloc's
  // returning and re-faulting large blocks shows up as. metrics.jsonl only.
  double minor_faults = 0;
  // Per part of the model, in model order (embedding, blocks, norm, output).
  std::vector<PartNorms> layers;
  // Per MoE layer, in model order (none for a dense model).
  std::vector<ExpertLoadStats> moe;
};

// The escape codes of the console's colours; all empty when colour is off.
struct ConsoleColors {
  std::string red, green, yellow, blue, magenta, cyan, orange, turquoise, reset;
};
// torchtitan's colours (`on`), or none.
const ConsoleColors& console_colors(bool on);

// "step:  1  loss:  8.12345  grad_norm:  1.2345  memory:  1.21GiB(0.86%)  tps: 5,756  tflops:
// 0.41  mfu: 0.04%  lr: 8.0000e-04" on one line, each field in torchtitan's colour when `colors`
// has them (the lr, titan-train's addition, after the reset).
std::string format_console_line(const StepMetrics& m,
                                const ConsoleColors& colors = console_colors(false));

// "moe load (max/mean tokens per expert): layers.0.moe 1.75  layers.1.moe 1.50"; "" for a dense
// model.
std::string format_moe_load_line(const StepMetrics& m);

// One JSON object, every number at full (round-trip) precision; the parts' norms as an object
// "layers": {"tok_embeddings": {"grad_norm": ..., "weight_norm": ..., "update_norm": ...,
// "update_ratio": ...}, "0": {...}, ...}; an MoE model's also "moe": {"layers.0.moe": {"max":
// ..., "mean": ..., "max_over_mean": ...}, ...}.
std::string format_json_line(const StepMetrics& m);

// A number as JSON writes it: round-trip precision, "NaN"/"Infinity" as strings.
std::string json_number(double v);

// metrics.jsonl's rule for cutting back on resume (LineStepRule): each line is its step's,
// '{"step": S, ...}'.
int64_t jsonl_line_step(const std::string& line);

// metrics.jsonl: one whole line per logged step (see LineFile).
class JsonlWriter {
 public:
  // Starts `path` empty, or (resume_step > 0) with the old file's lines of steps up to
  // resume_step (see rewrite_log_through_step). Throws RuntimeFailure.
  explicit JsonlWriter(const std::string& path, int64_t resume_step = 0);
  void write(const StepMetrics& m);  // throws RuntimeFailure
  // Another line of a step (a validation), starting '{"step": N'. Throws RuntimeFailure.
  void write_line(const std::string& line);

 private:
  LineFile file_;
};

}  // namespace titan

// <dump_folder>/numerics.log: where inside a step two runs' numerics part.
//
// Written every debug.numerics_freq steps when debug.numerics_trace is "blocks" or "ops", in a
// fixed order with exact values (64-bit checksums, hex floats) and nothing else (no times,
// paths), so `diff` of two files shows the first tensor that differs:
//
//   # titan-train numerics v1: diff two of these to find where runs part
//   level ops
//   freq 1
//   step 2 micro 0
//   fwd tok_embeddings checksum 5d1c0e6b9a3f2e11 mean 0x1.2p-9 max_abs 0x1.9p+1
//   op layers.0 0 aten::pow f32[2,32,64]:0f3c...:0x1.4p+3      (ops: one line per op, then
//   fwd layers.0 checksum ... mean ... max_abs ...               the block's output)
//   fwd norm ...
//   fwd output ...
//   step 2 grads
//   grad output.weight checksum ... mean ... max_abs ...        (backward order)
//   end step 2
//
// Forward lines come once per micro-batch, in forward order; gradients once per step, before
// clipping, in backward order (parameters in reverse registration order). An op line lists its
// outputs as dtype[sizes] plus, for outputs that hold values the op computed, ":checksum:max_abs"
// (max_abs "-" for non-floating outputs).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace titan {

// The first line of every numerics.log starts with this.
constexpr const char* kNumericsMagic = "# titan-train numerics v1";

// Checksum (tensors_checksum of the one tensor) and statistics in double, computed in a fixed
// order on one thread so that equal bits give equal text at any thread count.
struct TensorStats {
  uint64_t checksum = 0;
  double mean = 0;
  double max_abs = 0;
};
TensorStats tensor_stats(const at::Tensor& t);

// One output of a traced op. In the file: dtype[sizes] (and @device off the CPU), plus
// ":checksum:max_abs" when it holds values the op computed (max_abs "-" when not floating).
struct OpOutput {
  std::string dtype;  // "f32"
  std::vector<int64_t> sizes;
  std::string device;  // "" on the CPU, else "cuda:0"
  bool hashed = false;
  uint64_t checksum = 0;          // when hashed
  std::optional<double> max_abs;  // when hashed and floating
};
// "f32[2,32,64]", "bf16[4]@cuda:0"
std::string format_op_output_meta(const OpOutput& o);

enum class NumericsKind { kForward, kOp, kGradient };

struct NumericsEntry {
  NumericsKind kind = NumericsKind::kForward;
  int64_t micro_batch = 0;        // forward and op entries
  std::string name;               // tensor ("layers.1", "output.weight"); for an op, its block
  int64_t position = -1;          // op: index in the block's op trace
  std::string op;                 // op: "aten::mm"
  TensorStats stats;              // forward and gradient entries
  std::vector<OpOutput> outputs;  // op entries
  int64_t line = 0;               // 1-based line in the file it was read from; 0 in memory
};

struct NumericsStep {
  int64_t step = 0;
  int64_t line = 0;
  std::vector<NumericsEntry> forward;    // forward and op entries, all micro-batches, in order
  std::vector<NumericsEntry> gradients;  // backward order
};

// The file's text: its header, and one step's lines ("step N micro M" before each micro-batch's
// entries, "step N grads" before the gradients when there are any, "end step N"), op lines only
// `with_ops`. Formatting a parsed step gives back its lines.
std::string numerics_header(const std::string& level, int64_t freq);
std::string format_numerics_step(const NumericsStep& step, bool with_ops);

// numerics.log's rule for cutting back on resume (LineStepRule): "step S micro M", "step S
// grads" and "end step S" belong to step S, the entry lines to the step of the line before.
int64_t numerics_line_step(const std::string& line);

// "fwd layers.1", "op layers.1 #12 aten::mm", "grad output.weight" (micro-batch appended when > 0).
std::string describe_entry(const NumericsEntry& e);

}  // namespace titan

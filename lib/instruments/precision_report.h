// What a precision step measured (lib/train/precision_probe.h), and its three renderings: the
// console's short table, <dump_folder>/precision/step<N>.txt and step<N>.json.
//
// Errors are against the reference execution: rel_error = max |x - ref| / max |ref|, and
// rms_rel_error = ||x - ref||_2 / ||ref||_2, both computed in float64 (complex values as their
// real and imaginary parts). An op's added error is that of the op alone: the op run in the run's
// dtypes on the reference's inputs rounded to them, against the reference's output.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace titan {

struct RelativeError {
  double max_rel = 0;  // max |x - ref| / max |ref|
  double rms_rel = 0;  // ||x - ref|| / ||ref||
};

// Requires: `value` and `reference` of one shape (any floating or complex dtypes).
RelativeError relative_error(const at::Tensor& value, const at::Tensor& reference);

struct OpPrecision {
  int64_t micro_batch = 0;
  int64_t block = 0;
  int64_t index = 0;    // among the block's top-level ops, as numerics.log numbers them
  std::string name;     // "aten::linear", "titan::rms_norm", ...
  std::string dtype;    // of the run's output: "f32", or "bf16" for an op autocast ran in bf16
  std::string shape;    // "[4, 512, 256]"
  RelativeError error;  // the run's output
  RelativeError added;  // the op alone
  // The run's output itself: tensor_checksum of its bytes (contiguous) and its float64 L2 norm,
  // for comparing two executions that never meet (a capture and its replay).
  uint64_t checksum = 0;
  double norm = 0;
};

struct ScalarPrecision {
  double run = 0;
  double reference = 0;
  double rel_error = 0;  // |run - reference| / |reference|
};

struct GradientPrecision {
  std::string name;
  RelativeError error;
  // The gradient's norm as the run's grad_norm computes it (float32 sum of squares, unless
  // debug.grad_norm_accumulate = "float64") against its exact norm (float64 sum), and that
  // difference's share of the whole grad_norm's difference: which parameter's sum loses it.
  double norm_rel_error = 0;
  double norm_error_share = 0;
  uint64_t checksum = 0;  // tensor_checksum of the run's gradient
};

struct PrecisionReport {
  int64_t step = 0;
  std::string dtype;      // the run's: "float32" or "bfloat16" (autocast)
  std::string reference;  // "float64"
  // The run's step executed again in its own dtype gave its loss and grad_norm bit for bit (the
  // op errors describe the step the run took).
  bool reexecution_bitwise = false;
  ScalarPrecision loss;
  ScalarPrecision grad_norm;
  std::string grad_norm_accumulate;  // "float32" (PyTorch's) or "float64"
  // The exact (float64-summed) norm of the run's own gradients: run minus this is the error of
  // the sum alone; this minus the reference, the gradients' own error.
  double grad_norm_exact_sum = 0;
  std::vector<OpPrecision> ops;
  std::vector<RelativeError> blocks;  // each block's output, micro-batch 0
  RelativeError logits;               // micro-batch 0
  std::vector<GradientPrecision> gradients;
  std::optional<size_t> worst_op;  // index into ops: the largest added max_rel
  std::vector<std::string> notes;  // what could not be compared (the console's warnings)
  double seconds = 0;              // both executions and the ops' re-execution
};

// Fills worst_op.
void find_worst_op(PrecisionReport& report);

// The console's summary: the ten ops that add the most error, the loss and grad_norm.
std::string format_precision_summary(const PrecisionReport& report);
// The whole report as text (step<N>.txt) and JSON (step<N>.json).
std::string format_precision_text(const PrecisionReport& report);
std::string format_precision_json(const PrecisionReport& report);

}  // namespace titan

// What `titan-train replay` found (train/replay.h): a captured step (one side: the machine and
// build that captured it) against its execution here (the other side), op by op.
//
// Two ops are the same when their outputs' bytes are (checksums). Where they differ, each side's
// added error is that side's op run alone on the float64 execution's inputs (rounded to the op's
// dtypes) against the float64 op: precision attribution's per-op measure, made on each machine.
// The verdict on an op: both sides are within its error bound when both added errors are at most
// kBoundUnits units of roundoff of the op's output dtype (2^-24 for f32, 2^-8 for bf16); else the
// side whose added error is smaller is the closer to float64, by the ratio of the two. An op
// after the first differing one "adds" when its sides' added errors disagree (one above the
// bound, and more than 2x the other), else it "inherits": its inputs differed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "instruments/capture_format.h"

namespace titan {

constexpr double kBoundUnits = 16;

enum class Closer { kBothWithinBound, kCapture, kReplay };

struct OpComparison {
  CapturedOp capture, replay;
  double bound = 0;  // the op's error bound (max rel)
  Closer closer = Closer::kBothWithinBound;
  double factor = 1;           // the larger added error over the smaller
  bool adds = false;           // its sides' added errors disagree (see above)
  double norm_difference = 0;  // |replay norm - capture norm| / capture norm
};

struct ScalarSides {
  double capture = 0, replay = 0;                      // the step's value on each side
  double capture_reference = 0, replay_reference = 0;  // each side's float64 execution
};

struct MachineDifference {
  std::string key, capture, replay;
};

struct ReplayReport {
  int64_t step = 0;
  std::string capture_folder;
  std::string captured_by;  // titan-train version
  std::vector<MachineDifference> machine_differences;
  bool identical = false;  // every op output, gradient, the loss and grad_norm, bit for bit
  int64_t ops_compared = 0, ops_differing = 0;
  int64_t gradients_compared = 0, gradients_differing = 0;
  // Of the differing gradients, the one the backward computes first (the last in the model's
  // order); "" when none.
  std::string first_gradient_differing;
  // Ops recorded on one side only (another libtorch records other ops: a view, a copy); the rest
  // are matched in order by micro-batch, block, name, dtype and shape, and compared. "" when none.
  std::string structure_difference;
  std::optional<OpComparison> first;  // the first op whose output differs
  std::vector<OpComparison> worst;    // up to 10 more, the largest disagreements first
  ScalarSides loss, grad_norm;
  bool capture_reexecution_bitwise = true;
  double seconds = 0;  // the replay's executions
};

// Compares the two sides. `capture_machine` and `replay_machine` are machine.txt's maps; keys
// that cannot change a replay's bits (the tokenizer: the batch is captured) are not listed.
ReplayReport compare_replay(const CaptureRecord& capture, const CaptureRecord& replay,
                            const std::map<std::string, std::string>& capture_machine,
                            const std::map<std::string, std::string>& replay_machine);

// Judges one op whose outputs differ (fills bound, closer, factor, adds).
void judge_op(OpComparison& op);

std::string format_replay_text(const ReplayReport& report);
std::string format_replay_json(const ReplayReport& report);

}  // namespace titan

// Comparing two runs from the files they wrote (fingerprint.log, and when present config.toml
// and numerics.log): header differences, the first step and field where they part, how the loss
// difference grows, and from numerics.log the first tensor, op or gradient that differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/numerics_reader.h"
#include "config/schema.h"

namespace titan {

// The files of one run. `arg` is a dump folder or a fingerprint.log; config.toml and
// numerics.log are taken from the same folder when they exist there.
struct RunFiles {
  std::string arg;
  std::string fingerprint;
  std::optional<std::string> config;
  std::optional<std::string> numerics;
};

// Throws ConfigError naming `arg` when it has no fingerprint.log.
RunFiles locate_run(const std::string& arg);

struct HeaderDifference {
  std::string key, a, b;  // a value is "(absent)" when only one file has the key
};

// One field of one step: "loss", "grad_norm", "lr", "tokens" or "params".
struct FieldDifference {
  int64_t step = 0;
  std::string field;
  std::string a_text, b_text;  // as in the file (checksums in hex, numbers at full precision)
  bool numeric = false;        // abs_diff and rel_diff mean something
  double a = 0, b = 0, abs_diff = 0, rel_diff = 0;
};

struct LossRow {
  int64_t step = 0;
  double a = 0, b = 0, abs_diff = 0, rel_diff = 0;
};

// The first entry of a numerics step that differs, with both sides (either may be absent when
// the two traces do not list the same tensors).
struct NumericsDifference {
  std::optional<NumericsEntry> a, b;
};

struct NumericsComparison {
  bool compared = false;        // both runs have numerics.log
  std::string note;             // why not, or what was left out ("op lines: only A traced ops")
  std::optional<int64_t> step;  // first common traced step with a difference
  std::optional<NumericsDifference> forward;   // first block-level tensor, forward order
  std::optional<NumericsDifference> op;        // first op (both traced ops)
  std::optional<NumericsDifference> gradient;  // first gradient, backward order
  std::optional<double> tolerance;             // set: statistics compared, not checksums
};

struct Comparison {
  RunFiles a, b;
  std::vector<HeaderDifference> header;
  bool configs_compared = false;
  std::vector<ConfigKeyDifference> config_keys;
  // Both config.toml say debug.batch_invariant: threads, ranks and micro-batches cannot part them.
  bool both_batch_invariant = false;
  int64_t steps_a = 0, steps_b = 0, common_steps = 0;
  std::optional<double> tolerance;
  bool identical = false;  // every field of every common step bitwise equal
  // First bitwise difference (identical == false), and the first beyond the tolerance.
  std::optional<FieldDifference> first_difference;
  std::optional<FieldDifference> first_beyond_tolerance;
  double max_rel_diff = 0;           // over loss, grad_norm and lr of the common steps
  std::vector<LossRow> loss_growth;  // from the first divergent step, up to 10 rows
  NumericsComparison numerics;

  bool diverged() const;  // beyond the tolerance, or not identical without one
  int exit_code() const { return diverged() ? 1 : 0; }
};

// Reads both runs and compares them. `tolerance` (relative) lets loss, grad_norm and lr differ
// by up to REL x max(|a|, |b|) and ignores checksums (different hardware computes other bits);
// numerics.log's tensors then differ when their mean or max_abs differ by more than REL x the
// larger max_abs (an op's outputs: their max_abs), so that a run can be compared with another
// implementation's trace (scripts/reference/hf_llama_reference.py writes one).
// Throws ConfigError naming file and line for a missing, malformed or truncated input, or when
// the runs share no step.
Comparison compare_runs(const std::string& run_a, const std::string& run_b,
                        std::optional<double> tolerance);

// The first difference between two numerics.log files (exposed for tests): checksums, or with
// `tolerance` the statistics as compare_runs says.
NumericsComparison compare_numerics(const NumericsLogFile& a, const NumericsLogFile& b,
                                    std::optional<double> tolerance = std::nullopt);

// The report for people, and the same as one JSON object.
std::string format_comparison_text(const Comparison& c);
std::string format_comparison_json(const Comparison& c);

}  // namespace titan

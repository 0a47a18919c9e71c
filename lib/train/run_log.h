// The console lines that frame a run: what it will do, printed once its outputs are open, and
// what it did, printed after the last step.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "train/run_components.h"
#include "train/summary.h"
#include "util/stopwatch.h"

namespace titan {

// Model, kernels, device and seed, determinism, data, batch, FLOPs, activation checkpointing,
// each instrument's line, and what the run resumed from.
void log_run_start(const RunComponents& run, std::ostream& log);

// The summary line, the gradient all-reduce's share, the fingerprint checksums' cost
// (`checksums`), `output_lines` (the outputs' own costs), CPU time, and each instrument's line.
void log_run_end(const RunComponents& run, const TrainSummary& summary,
                 const std::vector<std::string>& output_lines, const CostMeter& checksums,
                 std::ostream& log);

}  // namespace titan

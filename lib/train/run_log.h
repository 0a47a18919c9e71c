// The console lines that frame a run: what it will do, printed once its outputs are open, and
// what it did, printed after the last step.
#pragma once

#include <iosfwd>

#include "train/run.h"
#include "train/run_parts.h"

namespace titan {

// Model, kernels, device and seed, determinism, data, batch, FLOPs, activation checkpointing,
// numerics trace, rerun check, and what the run resumed from.
void log_run_start(const RunParts& parts, std::ostream& log);

// The summary line, the gradient all-reduce's share, the checksums' cost, CPU time and the rerun
// check's cost.
void log_run_end(const RunParts& parts, const TrainSummary& summary, std::ostream& log);

}  // namespace titan

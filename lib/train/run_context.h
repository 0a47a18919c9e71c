// RunContext: the process-wide set-up of one run, built by the app layer in a fixed order
// (app/run_context.h) and handed to the Trainer.
#pragma once

#include <c10/core/Device.h>

#include <iosfwd>
#include <memory>

#include "config/config.h"
#include "determinism/determinism.h"
#include "distributed/process_group.h"
#include "distributed/world.h"
#include "metrics/fingerprint.h"
#include "metrics/metrics.h"
#include "util/run_lock.h"

namespace titan {

struct RunContext {
  Config config;  // resolved; debug.seed holds the seed actually used
  std::ostream* log = nullptr;
  WorldInfo world;
  std::unique_ptr<ProcessGroup> process_group;
  DeterminismRecord determinism;
  c10::Device device = c10::Device(c10::kCPU);
  double peak_flops = 0;    // for MFU: measured sgemm on CPU, the device table on CUDA; 0 unknown
  int64_t resume_step = 0;  // the checkpoint step the Trainer resumed from; 0 for a fresh run

  // Output sinks, opened last (after the Trainer has built everything it needs), so that a run
  // that fails to start leaves an earlier run's files untouched. Null until then. The lock on the
  // dump folder is held from then until the context is destroyed.
  std::unique_ptr<RunLock> dump_folder_lock;
  std::unique_ptr<JsonlWriter> metrics;
  std::unique_ptr<FingerprintLog> fingerprint;
};

}  // namespace titan

// What a run's training loop did, for its caller and the end-of-run log.
#pragma once

#include <cstdint>
#include <vector>

namespace titan {

struct TrainSummary {
  int64_t steps = 0;           // completed by this process's call to train()
  double seconds = 0;          // their wall time
  double mean_tps = 0;         // over all ranks
  std::vector<double> losses;  // one per step
  double cpu_user_s = 0;       // the process's CPU time in the steps
  double cpu_system_s = 0;
  double minor_faults = 0;  // in the steps
};

}  // namespace titan

// Wall-clock timing of the run's parts (steady clock, seconds as double).
#pragma once

#include <chrono>
#include <cstdint>

namespace titan {

using SteadyClock = std::chrono::steady_clock;

// Seconds from `start` to now.
inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Adds the wall time of its scope to `total` (the caller's running sum) when it ends.
class ScopedSeconds {
 public:
  explicit ScopedSeconds(double& total) : total_(total), start_(SteadyClock::now()) {}
  ~ScopedSeconds() { total_ += seconds_since(start_); }
  ScopedSeconds(const ScopedSeconds&) = delete;
  ScopedSeconds& operator=(const ScopedSeconds&) = delete;

 private:
  double& total_;
  SteadyClock::time_point start_;
};

// The cost of something a run does now and then (checksums, measurements, event records,
// re-executions): how often, and its wall time in all. The end-of-run log reports each.
struct CostMeter {
  int64_t count = 0;
  double seconds = 0;
  double per_count() const { return count > 0 ? seconds / static_cast<double>(count) : 0.0; }
  double percent_of(double total_seconds) const {
    return total_seconds > 0 ? 100.0 * seconds / total_seconds : 0.0;
  }
};

}  // namespace titan

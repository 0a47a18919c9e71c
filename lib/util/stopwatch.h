// Wall-clock timing of the run's parts (steady clock, seconds as double).
#pragma once

#include <chrono>

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

}  // namespace titan

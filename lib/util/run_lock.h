// An exclusive lock on a folder for the lifetime of a run: flock(2) on <folder>/.titan-train.lock,
// which also records the holder's PID for the message a second run prints.
#pragma once

#include <string>

namespace titan {

class RunLock {
 public:
  // Takes the lock without waiting. Throws ConfigError (exit 2) naming the folder and the
  // holder's PID when another process holds it, RuntimeFailure when the lock file cannot be
  // created. The kernel releases the lock when the process ends, however it ends.
  explicit RunLock(const std::string& folder);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace titan

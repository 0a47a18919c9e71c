// An exclusive lock on a folder for the lifetime of a run: flock(2) on a lock file in it (the run
// folder's, config/run_folder.h), which also records the holder's PID for the message a second
// run prints.
#pragma once

#include <string>

namespace titan {

class RunLock {
 public:
  // Takes the lock without waiting. Throws ConfigError (exit 2) naming the folder and the
  // holder's PID when another process holds it, RuntimeFailure when the lock file cannot be
  // created. The kernel releases the lock when the process ends, however it ends.
  // `lock_file` is the lock's file inside `folder` (named in messages); `key` is the config key
  // that chose the folder (named in the error).
  RunLock(const std::string& lock_file, const std::string& folder, const std::string& key);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace titan

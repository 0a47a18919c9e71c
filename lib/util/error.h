// Error types that carry the process exit code they map to.
//
// Contract: every failure that should stop titan-train is thrown as one of these (or as a plain
// std::exception, which main maps to exit code 1). main() is the only place that catches them.
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>

namespace titan {

// Exit codes, documented in README.md. Scripts rely on these numbers.
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntimeError = 1,  // anything that went wrong while running (I/O, NaN loss, ...)
  kExitConfigError = 2,   // bad config file, bad flag, bad value: detected before any work starts
  kExitCheckFailed = 3,   // a determinism or recompute check failed
  // compare and replay: no verdict (bad usage or input, out of memory, an I/O error), diff's
  // "trouble", never 1 (parted), which a script reads as a divergence.
  kExitNoVerdict = 2,
};

// Bad config or usage. `where` names the file:line:col or the flag; `hint` suggests the fix.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& where, const std::string& message, const std::string& hint = "");
  const std::string& where() const { return where_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  std::string where_, message_, hint_;
};

// A run-time failure (exit code 1) with an optional hint for the user.
class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& message, const std::string& hint = "");
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// An allocation failed, named where it could be (exit code 1): main ends the process without
// exit handlers (see report_current_exception).
class OutOfMemory : public RuntimeFailure {
 public:
  using RuntimeFailure::RuntimeFailure;
};

// A determinism or recompute check failed (exit code 3). `details` (the evidence, such as both op
// traces of a recompute mismatch) is printed before the message when reported.
class CheckFailure : public std::runtime_error {
 public:
  explicit CheckFailure(const std::string& message, const std::string& hint = "",
                        const std::string& details = "")
      : std::runtime_error(message), hint_(hint), details_(details) {}
  const std::string& hint() const { return hint_; }
  const std::string& details() const { return details_; }

 private:
  std::string hint_, details_;
};

// The run was stopped by a signal (SIGTERM, SIGINT) between steps: exit code 128 + signal, as a
// shell reports a process killed by it.
class StoppedBySignal : public std::runtime_error {
 public:
  StoppedBySignal(int signal, const std::string& message)
      : std::runtime_error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Whether `message` (a library's error text) reports a failed allocation: ATen's "can't allocate
// memory", CUDA's "out of memory". Sets *size to the size it asked for ("2.00 GiB") or "".
bool is_allocation_failure(const std::string& message, std::string* size = nullptr);

// The hint every out-of-memory message ends with.
extern const char* const kOutOfMemoryHint;

// For use inside a catch block: prints the in-flight exception as "titan-train: <kind>: message"
// plus its hint to `err` and returns the exit code it maps to (ConfigError 2, CheckFailure 3,
// StoppedBySignal 128 + signal, anything else 1). A failed allocation anywhere (std::bad_alloc,
// ATen's allocator, OutOfMemory) is "out of memory" with the size asked for where known, exit 1,
// and sets *out_of_memory.
int report_current_exception(std::ostream& err, bool* out_of_memory = nullptr);

// For a command whose result is what it prints (compare, --help, --print-config): flushes `out`
// and, when that or an earlier write to it failed (a full disk, a device that refuses writes),
// says so on `err` and returns exit 1 instead of `code` 0. Training's console is not a result:
// a run goes on when its console fails.
int check_result_written(std::ostream& out, std::ostream& err, int code);

// Installs a std::terminate handler that reports an uncaught std::bad_alloc (a library's static
// initializer, a thread) as titan-train's "out of memory" message on stderr and ends the process
// with `exit_code`; other exceptions abort as before. Safe to call before main.
void install_out_of_memory_terminate_handler(int exit_code = kExitRuntimeError);

}  // namespace titan

#include "util/error.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <ostream>
#include <regex>

namespace titan {
namespace {

std::string compose(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

}  // namespace

ConfigError::ConfigError(const std::string& where, const std::string& message,
                         const std::string& hint)
    : std::runtime_error(compose(where, message)), where_(where), message_(message), hint_(hint) {}

RuntimeFailure::RuntimeFailure(const std::string& message, const std::string& hint)
    : std::runtime_error(message), hint_(hint) {}

const char* const kOutOfMemoryHint =
    "the process reached its memory limit (the machine's memory, the cgroup's memory.max, or "
    "ulimit -v): lower training.local_batch_size or training.seq_len, use "
    "activation_checkpoint.mode = \"full\", or raise the limit";

bool is_allocation_failure(const std::string& message, std::string* size) {
  if (message.find("can't allocate memory") == std::string::npos &&
      message.find("out of memory") == std::string::npos) {
    return false;
  }
  if (size) {
    static const std::regex bytes("allocate ([0-9]+) bytes"), cuda("allocate ([0-9.]+ [KMGT]?i?B)");
    std::smatch m;
    *size = "";
    if (std::regex_search(message, m, bytes)) {
      *size = fmt::format("{:.2f} GiB", std::stod(m[1].str()) / (1024.0 * 1024.0 * 1024.0));
    } else if (std::regex_search(message, m, cuda)) {
      *size = m[1].str();
    }
  }
  return true;
}

namespace {

std::terminate_handler g_previous_terminate = nullptr;
int g_out_of_memory_exit_code = kExitRuntimeError;

void out_of_memory_terminate() {
  bool bad_alloc = false;
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::bad_alloc&) {
      bad_alloc = true;
    } catch (...) {
    }
  }
  if (!bad_alloc) {
    if (g_previous_terminate) g_previous_terminate();
    std::abort();
  }
  // No allocation from here on: write(2) of fixed text.
  static const char message[] =
      "titan-train: error: out of memory while starting (an allocation failed before titan-train "
      "could report it)\n  hint: ";
  (void)!::write(STDERR_FILENO, message, sizeof message - 1);
  (void)!::write(STDERR_FILENO, kOutOfMemoryHint, std::strlen(kOutOfMemoryHint));
  (void)!::write(STDERR_FILENO, "\n", 1);
  ::_exit(g_out_of_memory_exit_code);
}

}  // namespace

void install_out_of_memory_terminate_handler(int exit_code) {
  g_out_of_memory_exit_code = exit_code;
  const std::terminate_handler previous = std::set_terminate(out_of_memory_terminate);
  if (previous != out_of_memory_terminate) g_previous_terminate = previous;
}

int check_result_written(std::ostream& out, std::ostream& err, int code) {
  out.flush();
  if (out) return code;
  const int error = errno;
  err << "titan-train: error: the result could not be written to stdout"
      << (error != 0 ? std::string(" (") + std::strerror(error) + ")" : std::string())
      << "\n  hint: check the disk or the file that stdout goes to\n";
  return code == kExitOk ? kExitRuntimeError : code;
}

int report_current_exception(std::ostream& err, bool* out_of_memory) {
  auto print = [&](const char* kind, const std::string& message, const std::string& hint) {
    err << "titan-train: " << kind << ": " << message << "\n";
    if (!hint.empty()) err << "  hint: " << hint << "\n";
  };
  try {
    throw;
  } catch (const ConfigError& e) {
    print("config error", e.what(), e.hint());
    return kExitConfigError;
  } catch (const StoppedBySignal& e) {
    err << "titan-train: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const CheckFailure& e) {
    err << e.details();
    print("check failed", e.what(), e.hint());
    return kExitCheckFailed;
  } catch (const OutOfMemory& e) {
    if (out_of_memory) *out_of_memory = true;
    print("error", e.what(), e.hint());
    return kExitRuntimeError;
  } catch (const RuntimeFailure& e) {
    print("error", e.what(), e.hint());
    return kExitRuntimeError;
  } catch (const std::bad_alloc&) {
    if (out_of_memory) *out_of_memory = true;
    print("error", "out of memory (an allocation failed)", kOutOfMemoryHint);
    return kExitRuntimeError;
  } catch (const c10::Error& e) {
    std::string size;
    if (is_allocation_failure(e.what_without_backtrace(), &size)) {
      if (out_of_memory) *out_of_memory = true;
      print("error",
            "out of memory" + (size.empty() ? std::string() : " (an allocation of " + size + ")"),
            kOutOfMemoryHint);
      return kExitRuntimeError;
    }
    print("error", e.what_without_backtrace(), "");
    return kExitRuntimeError;
  } catch (const std::exception& e) {
    print("error", e.what(), "");
    return kExitRuntimeError;
  } catch (...) {
    print("error", "unknown exception", "");
    return kExitRuntimeError;
  }
}

}  // namespace titan

#include "util/omp_env.h"

#include <c10/util/Logging.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"
#include "util/stop_signal.h"

namespace titan {
namespace {

// Names the variables that the first execution set, so the re-executed one can say so.
constexpr const char* kSetByTitan = "TITAN_SET_THREAD_ENV";

constexpr std::pair<const char*, const char*> kSettings[] = {
    {"OMP_WAIT_POLICY", "PASSIVE"},
    {"OPENBLAS_THREAD_TIMEOUT", "4"},
};

// libtorch's and c10d's own log lines (glog's "Logging before InitGoogleLogging()", c10d's
// socket errors) reach the user before titan-train's message says the same thing clearly: every
// failure titan-train reports comes to it as an exception, so libtorch keeps only fatal lines
// unless the user set the variables (GLOG_minloglevel=0 for 1.13's glog, TORCH_CPP_LOG_LEVEL=INFO
// for 2.x's own logging, shows them all). glog reads its variable at load, like the above.
constexpr std::pair<const char*, const char*> kQuietLibraries[] = {
    {"GLOG_minloglevel", "3"},
    {"TORCH_CPP_LOG_LEVEL", "FATAL"},
};

bool set_by_titan(const char* name) {
  const char* list = std::getenv(kSetByTitan);
  return list != nullptr && std::strstr(list, name) != nullptr;
}

}  // namespace

void ensure_idle_threads_sleep(char** argv) {
  std::string set_now;
  bool failed = false;
  auto set_missing = [&](const auto& settings) {
    for (const auto& [name, value] : settings) {
      if (std::getenv(name) != nullptr) continue;
      if (setenv(name, value, /*overwrite=*/0) != 0) failed = true;
      set_now += set_now.empty() ? name : std::string(",") + name;
    }
  };
  set_missing(kSettings);
  set_missing(kQuietLibraries);
  if (failed) return;
  if (set_now.empty()) return;
  setenv(kSetByTitan, set_now.c_str(), /*overwrite=*/1);
  hold_stop_signals_across_exec();  // a SIGTERM already received is the new image's too
  execv("/proc/self/exe", argv);
  unblock_after_failed_exec();
  // execv returned: keep running with the libraries' defaults (the variables are set for children).
}

namespace {

// Whether `value` is a positive decimal integer (a comma-separated list of them with `list`,
// as OMP_NUM_THREADS allows for nested levels).
bool positive_integers(const std::string& value, bool list) {
  if (value.empty()) return false;
  size_t start = 0;
  for (;;) {
    const size_t end = list ? value.find(',', start) : std::string::npos;
    const std::string part = value.substr(start, end == std::string::npos ? end : end - start);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != part.npos ||
        std::stol(part) == 0) {
      return false;
    }
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

}  // namespace

void check_thread_environment() {
  auto check = [](const char* name, bool ok, const std::string& wanted) {
    if (ok) return;
    throw ConfigError(std::string("environment variable ") + name,
                      std::string("\"") + std::getenv(name) + "\" is not " + wanted,
                      std::string("unset it, or set ") + wanted);
  };
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (const char* v = std::getenv(name)) {
      check(name, positive_integers(v, name[0] == 'O' && name[1] == 'M'), "a positive integer");
    }
  }
  if (const char* v = std::getenv("OMP_WAIT_POLICY")) {
    check("OMP_WAIT_POLICY", strcasecmp(v, "ACTIVE") == 0 || strcasecmp(v, "PASSIVE") == 0,
          "ACTIVE or PASSIVE");
  }
  if (const char* v = std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    check("OPENBLAS_THREAD_TIMEOUT", positive_integers(v, false), "a positive integer");
  }
}

void apply_library_log_level() {
  // libtorch reads TORCH_CPP_LOG_LEVEL only in initLogging(), which Python calls and a C++
  // program must call itself; without it libtorch 2.x's own logging (c10d's socket lines among
  // them) prints warnings and errors whatever the variable says.
  c10::initLogging();
}

std::string idle_threads_summary() {
  std::string line = "idle threads sleep:";
  for (const auto& [name, value] : kSettings) {
    const char* current = std::getenv(name);
    line += std::string(" ") + name + "=" + (current ? current : "unset");
    if (set_by_titan(name)) line += " (set by titan-train)";
    line += ";";
  }
  line.back() = ' ';
  return line + "(set either yourself to override)";
}

}  // namespace titan

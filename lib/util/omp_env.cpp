#include "util/omp_env.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace titan {
namespace {

// Names the variables that the first execution set, so the re-executed one can say so.
constexpr const char* kSetByTitan = "TITAN_SET_THREAD_ENV";

constexpr std::pair<const char*, const char*> kSettings[] = {
    {"OMP_WAIT_POLICY", "PASSIVE"},
    {"OPENBLAS_THREAD_TIMEOUT", "4"},
};

bool set_by_titan(const char* name) {
  const char* list = std::getenv(kSetByTitan);
  return list != nullptr && std::strstr(list, name) != nullptr;
}

}  // namespace

void ensure_idle_threads_sleep(char** argv) {
  std::string set_now;
  for (const auto& [name, value] : kSettings) {
    if (std::getenv(name) != nullptr) continue;
    if (setenv(name, value, /*overwrite=*/0) != 0) return;
    set_now += set_now.empty() ? name : std::string(",") + name;
  }
  if (set_now.empty()) return;
  setenv(kSetByTitan, set_now.c_str(), /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  // execv returned: keep running with the libraries' defaults (the variables are set for children).
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

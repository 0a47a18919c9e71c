#include "util/memory_limit.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "util/error.h"
#include "util/files.h"

namespace titan {
namespace {

// v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712).
constexpr double kUnlimited = 4.0e18;

std::optional<double> read_limit_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  if (text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  double bytes = std::stod(text);
  if (bytes >= kUnlimited) return std::nullopt;
  return bytes;
}

// "/a/b" -> {"/a/b", "/a", ""}: a cgroup's limit is also bounded by its ancestors'.
std::vector<std::string> path_and_ancestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  while (true) {
    out.push_back(path);
    if (path.empty()) return out;
    path = path.substr(0, path.rfind('/'));
  }
}

void take_smaller(std::optional<MemoryLimit>& best, const std::string& file) {
  auto bytes = read_limit_file(file);
  if (bytes && (!best || *bytes < best->bytes)) best = MemoryLimit{*bytes, "cgroup limit " + file};
}

bool has_memory_controller(const std::string& controllers) {
  std::istringstream list(controllers);
  for (std::string c; std::getline(list, c, ',');) {
    if (c == "memory") return true;
  }
  return false;
}

}  // namespace

std::optional<MemoryLimit> cgroup_memory_limit(const std::string& proc_self_cgroup,
                                               const std::string& cgroup_root) {
  std::optional<MemoryLimit> best;
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-id:controllers:path"; v2's unified hierarchy is "0::path".
    size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string id = line.substr(0, first);
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (id == "0" && controllers.empty()) {
      for (auto& p : path_and_ancestors(path)) take_smaller(best, cgroup_root + p + "/memory.max");
    } else if (has_memory_controller(controllers)) {
      for (auto& p : path_and_ancestors(path)) {
        take_smaller(best, cgroup_root + "/memory" + p + "/memory.limit_in_bytes");
      }
    }
  }
  return best;
}

MemoryLimit process_memory_limit() {
  MemoryLimit ram{
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)),
      "host RAM"};
  std::string text;
  try {
    text = read_file("/proc/self/cgroup", kMaxTextFileBytes);
  } catch (const std::system_error&) {
    // No cgroup information (not Linux, or /proc not mounted): host RAM is the limit.
  }
  auto cgroup = cgroup_memory_limit(text, "/sys/fs/cgroup");
  return cgroup && cgroup->bytes < ram.bytes ? *cgroup : ram;
}

void check_thread_headroom(int64_t threads) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  // A thread's stack (8 MiB by default) and OpenBLAS's per-thread buffer (128 MiB), and room
  // for the run's first allocations.
  const double bytes = static_cast<double>(threads) * 136.0 * kMiB + 256.0 * kMiB;
  void* probe = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe != MAP_FAILED) {
    ::munmap(probe, static_cast<size_t>(bytes));
    return;
  }
  throw OutOfMemory(
      fmt::format("out of memory at start-up: the address-space limit (ulimit -v {} KiB) leaves "
                  "less than the {:.0f} MiB that {} CPU threads need to start",
                  limit.rlim_cur / 1024, bytes / kMiB, threads),
      "raise ulimit -v, or lower training.cpu_threads");
}

void check_stack_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_STACK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  if (limit.rlim_cur >= kMinStackBytes) return;
  throw ConfigError("ulimit -s",
                    fmt::format("the stack limit is {} KiB; titan-train needs at least {} KiB "
                                "(every thread's stack is that size)",
                                limit.rlim_cur / 1024, kMinStackBytes / 1024),
                    "raise it before starting titan-train: ulimit -s 8192 (Linux's default)");
}

}  // namespace titan

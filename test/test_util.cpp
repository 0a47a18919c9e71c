#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "models/registry.h"
#include "util/files.h"

namespace titan::test {

RunResult run_titan(const std::string& args) { return run_titan_env("", args); }

std::vector<std::string> fingerprint_step_list(const std::string& path) {
  std::istringstream in(read_text(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

std::string fingerprint_step_lines(const std::string& path) {
  std::string out;
  for (const auto& line : fingerprint_step_list(path)) out += line + "\n";
  return out;
}

std::string run_step_lines(const std::string& dir) {
  return fingerprint_step_lines(dir + "/fingerprint.log");
}

ModelArgs tiny_model_args() { return flavor_args("llama3", "tiny"); }

std::string config_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.where() + ": " + e.message();
  }
  return "";
}

std::string tiny_run_seq32(const std::string& dir, int steps, const std::string& extra) {
  return tiny_run(dir, steps, "--training.seq_len 32 " + extra);
}

RunResult run_titan_env(const std::string& env, const std::string& args) {
  return run_shell(env + (env.empty() ? "" : " ") + binary() + " " + args + " 2>&1");
}

RunResult run_titan_bounded(const std::string& args, const std::string& env) {
  return run_shell("env " + env + " timeout 120 " + binary() + " " + args + " 2>&1");
}

std::string binary() { return TITAN_TRAIN_BINARY; }

std::string wait_for_line(const std::string& file, const std::string& prefix) {
  return "for i in $(seq 600); do grep -q '^" + prefix + "' " + file +
         " 2>/dev/null && break; sleep 0.1; done; ";
}

int free_port() {
  // Ports below the kernel's ephemeral range (32768-60999 by default): an ephemeral bind or an
  // outgoing connection elsewhere (Gloo, the rendezvous clients of tests running beside this
  // one) never takes them, so only an explicit bind can race with the caller. The start point
  // differs per process and per call, so concurrent tests try different ports first.
  static int calls = 0;
  constexpr int first = 20000, count = 12000;
  const int start = static_cast<int>((getpid() * 7919L + 97L * calls++) % count);
  for (int i = 0; i < count; ++i) {
    const int port = first + (start + i) % count;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (bound) return port;
  }
  throw std::runtime_error("no free loopback port in 20000-31999");
}

std::string tiny_run(const std::string& dir, int steps, const std::string& extra) {
  return "--model.flavor tiny --training.seq_len 16 --training.local_batch_size 2 "
         "--training.device cpu --debug.seed 5 --training.steps " +
         std::to_string(steps) + " --job.dump_folder " + dir + " " + extra;
}

RunResult run_shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  RunResult result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string temp_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() /
             ("titan_test_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return path;
}

std::string read_text(const std::string& path) { return read_file(path, kMaxLogFileBytes); }

std::string source_dir() { return TITAN_SOURCE_DIR; }

std::unique_ptr<InProcessRun> start_run(const Config& config) {
  auto run = std::make_unique<InProcessRun>();
  RunContextOptions options;
  options.measure_peak_flops = false;
  run->run = Run::open(config, run->log, options);
  run->trainer = &run->run->trainer();
  return run;
}

std::vector<VectorIsa> vector_isas_here() {
  std::vector<VectorIsa> isas;
  if (cpu_has_avx2_fma()) isas.push_back(VectorIsa::kAvx2);
  if (cpu_has_avx512()) isas.push_back(VectorIsa::kAvx512);
  return isas;
}

VectorIsaScope::VectorIsaScope(VectorIsa isa) {
  set_fused_kernels(isa == VectorIsa::kAvx2 ? FusedKernels::kAvx2Only : FusedKernels::kWidest);
}

VectorIsaScope::~VectorIsaScope() { set_fused_kernels(FusedKernels::kWidest); }

const char* isa_name(VectorIsa isa) { return isa == VectorIsa::kAvx512 ? "avx512" : "avx2"; }

}  // namespace titan::test

// Helpers for tests that run the real titan-train binary.
#pragma once

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/model_args.h"
#include "train/run.h"
#include "train/trainer.h"
#include "util/cpu_features.h"

namespace titan::test {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs build/titan-train with `args` (a shell-quoted string) and waits for it.
RunResult run_titan(const std::string& args);

// Same, with `env` ("NAME=value ...") prepended to the command's environment.
RunResult run_titan_env(const std::string& env, const std::string& args);

// Same, under `timeout 120` (exit 124 when it runs longer): for inputs that could make an open
// or a read block.
RunResult run_titan_bounded(const std::string& args, const std::string& env = "");

// Runs `command` with /bin/sh and waits; output is its stdout (redirect stderr yourself).
RunResult run_shell(const std::string& command);

// The lines of the fingerprint.log at `path` that start with "step " (the header, which names the
// run's folder and config, left out), each with its newline.
std::string fingerprint_step_lines(const std::string& path);
// The same lines, one element each.
std::vector<std::string> fingerprint_step_list(const std::string& path);
// fingerprint_step_lines of the run folder `dir`'s fingerprint.log.
std::string run_step_lines(const std::string& dir);

// The path of the titan-train binary under test.
std::string binary();

// A fresh, empty folder under the system temp dir, named after `tag`.
std::string temp_dir(const std::string& tag);

// Writes `text` to `path`; returns path.
std::string write_text(const std::string& path, const std::string& text);

std::string read_text(const std::string& path);

// Flags for a short, fast run of the tiny model into `dir`; `extra` appended (later flags win).
std::string tiny_run(const std::string& dir, int steps, const std::string& extra = "");
// The tiny flavor's model arguments.
ModelArgs tiny_model_args();
// "where: message" of the ConfigError `f` throws ("" when it throws none).
std::string config_error_message(const std::function<void()>& f);
// tiny_run at seq_len 32.
std::string tiny_run_seq32(const std::string& dir, int steps, const std::string& extra = "");

// Shell text that waits (at most 60 s) until `file` has a line starting with `prefix` (a grep
// basic regular expression), for a test that signals a process once it proves a state.
std::string wait_for_line(const std::string& file, const std::string& prefix);

// A loopback port nobody has bound right now, outside the kernel's ephemeral range.
int free_port();

// The project's source folder (for configs/).
std::string source_dir();

// A run opened in process as titan-train opens it (Run::open), without the start-up sgemm
// measurement; its console is `log`.
struct InProcessRun {
  std::ostringstream log;
  std::unique_ptr<Run> run;
  Trainer* trainer = nullptr;  // run's
};
std::unique_ptr<InProcessRun> start_run(const Config& config);

// The vector widths titan's fused kernels can run at on this CPU: AVX2, and AVX-512 where it has
// that; none without AVX2 and FMA.
std::vector<VectorIsa> vector_isas_here();

// Holds the fused kernels to `isa` (set_fused_kernels) while it lives; then back to the widest,
// the default. Requires `isa` in vector_isas_here().
class VectorIsaScope {
 public:
  explicit VectorIsaScope(VectorIsa isa);
  ~VectorIsaScope();
  VectorIsaScope(const VectorIsaScope&) = delete;
  VectorIsaScope& operator=(const VectorIsaScope&) = delete;
};

// "avx2" or "avx512", for a test's INFO.
const char* isa_name(VectorIsa isa);

}  // namespace titan::test

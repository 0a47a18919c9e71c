#include "metrics/fingerprint.h"

#include <fmt/format.h>
#include <torch/version.h>

#include "config/loader.h"
#include "config/schema.h"
#include "util/hash.h"
#include "util/strings.h"

namespace titan {

uint64_t config_hash(const Config& config) {
  Config copy = config;
  // The fused kernels' vector width changes no bit (util/simd_vectors.h): fused_avx2 hashes as
  // fused, and the header's kernel lines name the width.
  if (copy.debug.cpu_kernels == CpuKernels::kFusedAvx2) copy.debug.cpu_kernels = CpuKernels::kFused;
  std::string text;
  for (auto& f : config_fields(copy)) {
    if (f.excluded_from_hash) continue;
    const std::string value = f.has_value() ? f.value_as_toml() : "";
    if (f.hashed_when_changed && value == default_value_of(f)) continue;
    text += f.name() + "=" + (f.has_value() ? value : "unset") + "\n";
  }
  return hash_bytes(text.data(), text.size());
}

int64_t fingerprint_line_step(const std::string& line) { return step_after_prefix(line, "step "); }

std::string FingerprintLog::format_header(const FingerprintHeader& header) {
  const auto& d = header.determinism;
  std::string out =
      std::string(kFingerprintMagic) + ": diff two of these to compare runs bit for bit\n";
  out += fmt::format("titan_train_version {}\n", TITAN_VERSION);
  out += fmt::format("libtorch_version {}\n", TORCH_VERSION);
  out += fmt::format("device {} \"{}\"\n", header.device_type, header.device_name);
  out += fmt::format("config_hash {:016x}\n", header.config_hash);
  out += fmt::format("seed {}\n", d.seed);
  out += fmt::format("deterministic {}\n", d.deterministic);
  out += fmt::format("deterministic_warn_only {}\n", d.deterministic_warn_only);
  out += fmt::format("cudnn_deterministic {} cudnn_benchmark {}\n", d.cudnn_deterministic,
                     d.cudnn_benchmark);
  out += fmt::format("cublas_workspace_config {}\n",
                     d.cublas_workspace_config.empty() ? "unset" : d.cublas_workspace_config);
  out += fmt::format("cpu_threads {}\n", d.cpu_threads);
  out += fmt::format("blas_kernels {}\n", d.blas_kernels.name());
  if (!header.linear_kernel.empty()) out += fmt::format("linear_kernel {}\n", header.linear_kernel);
  out += fmt::format("attention_kernel {}\n", header.attention_kernel);
  out += fmt::format("swiglu_kernel {}\n", header.swiglu_kernel);
  out += fmt::format("rms_norm_kernel {}\n", header.rms_norm_kernel);
  out += fmt::format("adamw_kernel {}\n", header.adamw_kernel);
  out += fmt::format("world_size {}\n", d.world_size);
  if (!header.comm_numerics.empty()) out += fmt::format("comm_numerics {}\n", header.comm_numerics);
  if (!header.tokenizer.empty()) out += fmt::format("tokenizer {}\n", header.tokenizer);
  return out;
}

std::string FingerprintLog::format_step(int64_t step, double loss, double grad_norm, double lr,
                                        int64_t tokens_seen, std::optional<uint64_t> checksum) {
  std::string line = fmt::format("step {} loss {} ({:.9g}) grad_norm {} ({:.9g}) lr {} tokens {}",
                                 step, hex_float(loss), loss, hex_float(grad_norm), grad_norm,
                                 hex_float(lr), tokens_seen);
  if (checksum) line += fmt::format(" params {:016x}", *checksum);
  return line;
}

namespace {

// A resumed run's file, rewritten to its lines up to the checkpoint step, is appended to; a fresh
// run's is truncated and gets the header through the LineFile (a failing disk fails there).
const std::string& prepared(const std::string& path, const std::string& header,
                            int64_t resume_step) {
  if (resume_step > 0) rewrite_log_through_step(path, header, resume_step, fingerprint_line_step);
  return path;
}

}  // namespace

FingerprintLog::FingerprintLog(const std::string& path, const FingerprintHeader& header,
                               int64_t resume_step)
    : file_(prepared(path, format_header(header), resume_step),
            resume_step > 0 ? LineFile::Mode::kAppend : LineFile::Mode::kTruncate) {
  if (resume_step == 0) file_.write(format_header(header));
}

void FingerprintLog::write_step(int64_t step, double loss, double grad_norm, double lr,
                                int64_t tokens_seen, std::optional<uint64_t> checksum) {
  file_.write(format_step(step, loss, grad_norm, lr, tokens_seen, checksum));
}

}  // namespace titan

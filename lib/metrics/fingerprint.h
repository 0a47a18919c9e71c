// <dump_folder>/fingerprint.log: only what two runs computing the same bits must share.
//
// A header (versions, device, config hash, seed, determinism flags, threads, world size) and
// one line per step: loss and grad_norm as hex floats (exact bits) with a decimal for reading,
// the lr, the tokens seen, and every fingerprint_freq steps a 64-bit checksum of all parameters
// after the optimizer step. No timestamps, throughput or paths, so
//   diff run_a/fingerprint.log run_b/fingerprint.log
// is empty exactly when the two runs computed the same bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "determinism/determinism.h"
#include "util/files.h"

namespace titan {

// Hash of the resolved config, leaving out keys that cannot change the computation (outputs,
// logging) and those the header records resolved (device, threads).
uint64_t config_hash(const Config& config);

struct FingerprintHeader {
  std::string device_type;  // "cpu" / "cuda"
  std::string device_name;  // CPU model or GPU name
  uint64_t config_hash = 0;
  DeterminismRecord determinism;
  // Which causal attention the model runs (model/causal_attention.h): kernels round differently,
  // so two runs with different ones part from step 1.
  std::string attention_kernel;
  // Likewise, which SwiGLU gate (model/swiglu.h), RMSNorm (model/rmsnorm.h) and AdamW step
  // (optim/optimizer.h) it runs.
  std::string swiglu_kernel;
  std::string rms_norm_kernel;
  std::string adamw_kernel;
  // What orders the gradient sums over the ranks when the collective backend chooses it (NCCL:
  // "nccl NCCL_ALGO=Ring NCCL_PROTO=Simple"); "" (no header line) for Gloo and one process,
  // whose sums follow the rank order.
  std::string comm_numerics;
  // The tokenizer that encodes the text (data/text_encoding.h: its file, a hash of its bytes and
  // its vocabulary size); "" (no header line) when text is tokenized bytewise.
  std::string tokenizer;
  // The linear layers' matmuls when they do not run on ATen's (model/linear.h: "onednn 2.6.3");
  // "" (no header line) for ATen's, which blas_kernels names.
  std::string linear_kernel;
};

// The first line of every fingerprint.log starts with this.
constexpr const char* kFingerprintMagic = "# titan-train fingerprint v1";

// fingerprint.log's rule for cutting back on resume (LineStepRule): "step S ..." starts step S.
int64_t fingerprint_line_step(const std::string& line);

class FingerprintLog {
 public:
  // Writes the header to `path`, followed (for a run resumed after step `resume_step` > 0) by the
  // old file's lines of steps up to it (see rewrite_log_through_step). Throws RuntimeFailure
  // naming the path.
  FingerprintLog(const std::string& path, const FingerprintHeader& header, int64_t resume_step = 0);

  // One whole line per step. Throws RuntimeFailure naming the path.
  void write_step(int64_t step, double loss, double grad_norm, double lr, int64_t tokens_seen,
                  std::optional<uint64_t> params_checksum);

  static std::string format_header(const FingerprintHeader& header);
  static std::string format_step(int64_t step, double loss, double grad_norm, double lr,
                                 int64_t tokens_seen, std::optional<uint64_t> params_checksum);

 private:
  LineFile file_;
};

}  // namespace titan

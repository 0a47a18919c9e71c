// titan-bench-hf: writes a random Hugging Face Llama checkpoint of a flavor, and times loading
// one (scripts/bench_hf_load.sh runs it under /usr/bin/time -v for the peak RSS).
//
//   titan-bench-hf write FLAVOR DIR DTYPE SHARD_BYTES   random weights, as write_hf_checkpoint
//                                                        writes them (the 1B flavor tied, as
//                                                        Llama 3.2 1B's release)
//   titan-bench-hf load FLAVOR DIR                      load_hf_checkpoint in float32, timed
//   titan-bench-hf loss FLAVOR DIR SEQ                  the same, then the model built from it and
//                                                        the loss of one forward on SEQ tokens
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/model_checkpoint.h"
#include "model/model.h"
#include "models/registry.h"
#include "util/error.h"

using namespace titan;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<NamedTensor> random_parameters(const ModelArgs& args, bool tied) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  std::vector<NamedTensor> out;
  for (const auto& p : model_parameter_shapes(args)) {
    at::Tensor t = at::randn(p.sizes, gen, at::TensorOptions().dtype(at::kFloat));
    if (p.sizes.size() == 1) {
      t.mul_(0.1).add_(1.0);  // norm weights around 1
    } else {
      t.mul_(1.0 / std::sqrt(static_cast<double>(p.sizes[1])));
    }
    out.push_back({p.name, t});
  }
  if (tied) out.back().tensor = out.front().tensor;
  return out;
}

int run(const std::vector<std::string>& a) {
  if (a.size() < 3) {
    std::cerr << "usage: titan-bench-hf write FLAVOR DIR DTYPE SHARD_BYTES | load FLAVOR DIR | "
                 "loss FLAVOR DIR SEQ\n";
    return 2;
  }
  const ModelArgs args = flavor_args("llama3", a[1]);
  const auto start = std::chrono::steady_clock::now();
  if (a[0] == "write" && a.size() == 5) {
    HfWriteOptions o;
    o.dtype = a[3] == "bfloat16" ? at::kBFloat16 : a[3] == "float16" ? at::kHalf : at::kFloat;
    o.max_shard_bytes = std::stoull(a[4]);
    o.tie_if_equal = hf_ties_embeddings(*flavor);
    const auto record = write_hf_checkpoint(a[2], random_parameters(args, o.tie_if_equal), args, o);
    fmt::print("write {:.2f} s {} bytes {} files tied {}\n", seconds_since(start), record.bytes,
               record.files.size(), record.tied);
    return 0;
  }
  HfLoadReport report;
  auto tensors = load_hf_checkpoint(a[2], args, at::kFloat, &report);
  fmt::print("load {:.2f} s {} bytes {} files tied {}\n", seconds_since(start), report.bytes,
             report.files.size(), report.tied);
  if (a[0] == "load") return 0;
  const int64_t seq = a.size() > 3 ? std::stoll(a[3]) : 64;
  ModelArgs sized = args;
  sized.max_seq_len = seq;
  const auto built = std::chrono::steady_clock::now();
  Model model = build_model(sized);
  load_parameters(*model, tensors);
  tensors.clear();
  fmt::print("model {:.2f} s\n", seconds_since(built));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const auto tokens = at::randint(args.vocab_size, {1, seq + 1}, gen, at::kLong);
  torch::NoGradGuard no_grad;
  const auto forward = std::chrono::steady_clock::now();
  const auto logits = model->forward(tokens.slice(1, 0, seq));
  const auto loss = at::cross_entropy_loss(logits.flatten(0, 1), tokens.slice(1, 1).flatten());
  fmt::print("first loss {:.6f} (forward {:.2f} s, ln(vocab) {:.4f})\n", loss.item<double>(),
             seconds_since(forward), std::log(static_cast<double>(args.vocab_size)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (...) {
    return report_current_exception(std::cerr);
  }
}

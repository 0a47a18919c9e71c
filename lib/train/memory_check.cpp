#include "train/memory_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "metrics/device_stats.h"
#include "model/causal_attention.h"
#include "util/error.h"

namespace titan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

// Floats a token keeps for the backward in a block's feed-forward: SwiGLU's two hidden
// activations, or in an MoE block its top_k routed copies (input, two hidden activations,
// output), the shared experts' and the router's scores; the larger where both kinds of block are.
double feed_forward_floats(const ModelArgs& args) {
  const double dense = 2.0 * static_cast<double>(args.ffn_hidden_dim());
  if (!args.moe) return dense;
  const MoEArgs& m = *args.moe;
  const double hidden = static_cast<double>(args.moe_inter_dim);
  const double routed = static_cast<double>(m.top_k) * (2.0 * hidden + 2.0 * args.dim);
  const double moe = routed + 2.0 * hidden * static_cast<double>(m.num_shared_experts) +
                     2.0 * static_cast<double>(m.num_experts);
  return args.n_dense_layers > 0 ? std::max(dense, moe) : moe;
}

}  // namespace

int64_t largest_unit_params(const ModelArgs& args) {
  const int64_t table = args.vocab_size * args.dim;  // the embedding's, and the output's
  // A tied output is the embedding's table: held once, and gathered with the head's norm.
  const int64_t tables = args.tie_embeddings ? table : 2 * table;
  const int64_t blocks = args.num_params() - tables - args.dim;
  return std::max(table + args.dim, args.n_layers > 0 ? blocks / args.n_layers : 0);
}

MemoryEstimate estimate_memory(const ModelArgs& args, const Config& config,
                               int64_t grad_accum_steps, const c10::Device& device,
                               int64_t shard_degree) {
  const TrainingConfig& t = config.training;
  // Doubles throughout: the products may exceed int64 before the bounds below say no.
  const double tokens = static_cast<double>(t.local_batch_size) * static_cast<double>(t.seq_len);
  MemoryEstimate e;
  const double params = static_cast<double>(args.num_params());
  e.model_state = 16.0 * params;
  if (shard_degree > 1) {
    const double sharded = 16.0 * params / static_cast<double>(shard_degree) +
                           8.0 * static_cast<double>(largest_unit_params(args));
    // A rank builds only its shards (ParamMemory::shape_only), and a resume or a Hugging Face
    // folder gives it only its rows; initial weights from a .safetensors file or a step folder
    // are still read whole before each rank keeps its rows.
    const auto& c = config.checkpoint;
    const bool loads_whole = !c.initial_load_in_hf && !c.initial_load_path.empty();
    e.model_state = loads_whole ? std::max(4.0 * params, sharded) : sharded;
  }
  const double dim = static_cast<double>(args.dim);
  const double kv_dim = static_cast<double>(args.kv_heads() * args.head_dim());
  const double q_dim = static_cast<double>(args.n_heads * args.head_dim());  // Qwen3's: not dim
  const double one_block = dim + q_dim + 2.0 * kv_dim + feed_forward_floats(args);
  if (!device.is_cuda()) {
    const double T = static_cast<double>(t.seq_len);
    const double blocks = config.activation_checkpoint.mode == AcMode::kNone
                              ? static_cast<double>(args.n_layers)
                              : 1.0;
    const double heads = static_cast<double>(t.local_batch_size * args.n_heads);
    const at::ScalarType dtype =
        uses_bf16_autocast(t.mixed_precision_param, false) ? at::kBFloat16 : at::kFloat;
    const AttentionKernel kernel = attention_kernel_for(args.head_dim(), dtype, device);
    if (kernel == AttentionKernel::kBlockedAten) {
      e.attention = blocks * heads * 4.0 * (T * (T + 1.0) / 2.0);
      e.attention_saves = "the causal probabilities";
    } else if (kernel != AttentionKernel::kTorchSdpa) {  // the fused kernels
      e.attention = blocks * heads * 8.0 * T;
      e.attention_saves = "2 floats a query row";
    }
  }
  e.activations = tokens * 4.0 *
                      (2.0 * static_cast<double>(args.vocab_size) +
                       static_cast<double>(args.n_layers) * dim + one_block) +
                  e.attention;
  if (!config.debug.precision_steps.empty()) {
    const double scale =
        config.debug.precision_reference == PrecisionReference::kFloat64 ? 2.0 : 1.0;
    e.precision_step = scale * (8.0 * static_cast<double>(args.num_params()) + e.activations);
  }
  if (config.validation.enable) {
    const double validated = static_cast<double>(config.validation.local_batch_size) *
                             static_cast<double>(config.validation.seq_len);
    e.validation = validated * (4.0 * (static_cast<double>(args.vocab_size) + dim) + 16.0);
  }
  e.batches = 16.0 * tokens * static_cast<double>(grad_accum_steps);
  e.per_step = 8.0 * static_cast<double>(t.steps);
  return e;
}

void check_memory(const ModelArgs& args, const Config& config, int64_t grad_accum_steps,
                  const c10::Device& device, int64_t shard_degree) {
  const auto& t = config.training;
  const MemoryEstimate e = estimate_memory(args, config, grad_accum_steps, device, shard_degree);
  const double available = device_memory_bytes(device);
  const std::string limit = fmt::format("{} has {}", device_memory_source(device), gib(available));
  if (available <= 0) return;  // unknown: nothing to compare against
  if (e.model_state > available) {
    throw ConfigError("model.flavor",
                      fmt::format("{} needs at least {} for weights, gradients and AdamW state; {}",
                                  config.model.flavor, gib(e.model_state), limit),
                      "pick a smaller flavor (debugmodel runs anywhere), or shard the model "
                      "state over more ranks (parallelism.data_parallel_shard_degree)");
  }
  if (e.model_state + e.validation > available) {
    const auto& v = config.validation;
    throw ConfigError(
        "validation.local_batch_size x validation.seq_len",
        fmt::format("a validation batch of {} x {} tokens needs at least {} beside the {} of "
                    "model state, more than the limit: {}",
                    v.local_batch_size, v.seq_len, gib(e.validation), gib(e.model_state), limit),
        "lower validation.local_batch_size or validation.seq_len (validation.steps validates "
        "more batches, one at a time)");
  }
  // On CUDA the batches are built in host memory; everything else lives on the GPU.
  const double host_side = e.batches + e.per_step;
  const double on_device =
      e.model_state + e.activations + e.precision_step + (device.is_cuda() ? 0 : host_side);
  const double host = device.is_cuda() ? device_memory_bytes(c10::Device(c10::kCPU)) : available;
  if (on_device <= available && (!device.is_cuda() || host_side <= host)) return;
  const bool host_short = device.is_cuda() && on_device <= available;
  const std::string shown_limit =
      host_short ? fmt::format("{} has {}", device_memory_source(c10::Device(c10::kCPU)), gib(host))
                 : limit;
  const bool batches_dominate = host_short || e.batches > e.activations;
  throw ConfigError(
      batches_dominate ? "training.global_batch_size"
                       : "training.local_batch_size x training.seq_len",
      fmt::format(
          "the run needs at least {}, more than the limit: {} ({} for the model state, {} "
          "for the activations of {} x {} tokens per micro-batch ({} of them what attention "
          "saves for its backward{}), {} for the tokens of {} micro-batches per step{})",
          gib(host_short ? host_side : on_device), shown_limit, gib(e.model_state),
          gib(e.activations), t.local_batch_size, t.seq_len, gib(e.attention),
          e.attention_saves.empty() ? "" : ": " + e.attention_saves, gib(e.batches),
          grad_accum_steps,
          e.precision_step > 0
              ? fmt::format(", {} for debug.precision_steps' reference step", gib(e.precision_step))
              : ""),
      batches_dominate ? "lower training.global_batch_size"
                       : "lower training.seq_len or training.local_batch_size (a larger "
                         "global_batch_size accumulates gradients without more activation memory)");
}

}  // namespace titan

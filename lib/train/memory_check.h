// Refuses a run whose memory needs clearly exceed what the device allows, before anything
// large is allocated: a ConfigError (exit 2) naming the keys, the estimate and the limit beats
// std::bad_alloc, libtorch's "can't allocate memory" or the OOM killer minutes into the run.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "config/config.h"
#include "model/model_args.h"

namespace titan {

// Lower bounds, in bytes, of what a run holds at its peak; each term is certain to be allocated,
// so a run refused on them could not have fit.
struct MemoryEstimate {
  // fp32 weights, gradients and AdamW's two moments: 16 B/parameter, on each rank. Under FSDP
  // 16 B/parameter / shard degree, plus the largest unit's weights and gradients gathered (8 B
  // each of its parameters); at least the whole model's weights (4 B/parameter) when the run
  // loads initial weights, which are read whole before a rank keeps its rows.
  double model_state = 0;
  // One micro-batch: logits and their gradient, each block's input, and while one block runs
  // (in any activation checkpointing mode) its q, k, v, attention output and SwiGLU's two
  // hidden projections.
  double activations = 0;
  // Of `activations`: what the CPU attention kernel saves for its backward, for every block
  // without activation checkpointing and for the one block recomputed at a time with it. The
  // blocked ATen kernel saves the probabilities, a causal (T, T) triangle per head and sequence;
  // the fused kernels 2 floats a query row (they compute the weights again); the flash kernels
  // (scaled_dot_product_attention, libtorch 2.x) O(T), not counted. Requires the kernel choice
  // made (make_deterministic: debug.cpu_kernels).
  double attention = 0;
  std::string attention_saves;  // what `attention` counts, for messages ("" when nothing)
  // debug.precision_steps: the reference replica's weights and gradients in its precision, and a
  // micro-batch's activations (attention included) in it.
  double precision_step = 0;
  // validation.enable: a validation batch's forward, held beside the model state between steps:
  // its logits and final hidden states (4 B each of vocab_size + dim a token; no gradients) and
  // its int64 inputs and labels.
  double validation = 0;
  double batches = 0;   // a step's micro-batches (int64 inputs and labels), all held at once
  double per_step = 0;  // the run's one-loss-per-step record
};

// `shard_degree`: the ranks FSDP shards the model state over (1: every rank holds all of it).
MemoryEstimate estimate_memory(const ModelArgs& args, const Config& config,
                               int64_t grad_accum_steps, const c10::Device& device,
                               int64_t shard_degree = 1);

// The parameters of the model's largest FSDP unit (the embedding, a block, or norm + output).
int64_t largest_unit_params(const ModelArgs& args);

// Throws ConfigError when the estimate exceeds device_memory_bytes(device) (host RAM or the
// cgroup limit on CPU, whichever is smaller; the GPU's memory for model and activations on CUDA).
void check_memory(const ModelArgs& args, const Config& config, int64_t grad_accum_steps,
                  const c10::Device& device, int64_t shard_degree = 1);

}  // namespace titan

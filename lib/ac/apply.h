// Applying [activation_checkpoint] to a Transformer: which blocks are wrapped, and how.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ac/recompute.h"
#include "config/config.h"
#include "model/llama.h"

namespace titan::ac {

// The layer indices `mode` wraps among n_layers, as torchtitan chooses them: every block for
// "full"; for "selective" with option N, the blocks whose 1-based position is a multiple of N
// (N = 2 on 6 layers: layers.1, layers.3, layers.5); none for "none". Throws ConfigError for a
// selective_ac_option that selective mode cannot use (see ac_block_period).
std::vector<int64_t> checkpointed_layers(const ActivationCheckpointConfig& config,
                                         int64_t n_layers);

// Routes the chosen blocks of `model` through run_recomputed() with the config's options, debug
// traces going to `debug_dir` and each checked forward's ops to `trace_sink` (may be null). Returns
// the wrapped blocks' names ("layers.1", ...).
std::vector<std::string> apply_activation_checkpointing(
    Transformer& model, const ActivationCheckpointConfig& config, const std::string& debug_dir = "",
    std::shared_ptr<OpTraceSink> trace_sink = nullptr);

}  // namespace titan::ac

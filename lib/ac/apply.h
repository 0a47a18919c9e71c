// Applying [activation_checkpoint] to a Model: which blocks are wrapped, and how.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ac/recompute.h"
#include "config/config.h"
#include "model/model.h"

namespace titan::ac {

// The layer indices `mode` wraps among n_layers, as torchtitan chooses them: every block for
// "full"; for "selective" with option N, the blocks whose 1-based position is a multiple of N
// (N = 2 on 6 layers: layers.1, layers.3, layers.5); none for "none". Throws ConfigError for a
// selective_ac_option that selective mode cannot use (see ac_block_period).
std::vector<int64_t> checkpointed_layers(const ActivationCheckpointConfig& config,
                                         int64_t n_layers);

// The blocks apply_activation_checkpointing wrapped.
struct CheckpointedBlocks {
  std::vector<std::string> names;  // "layers.1", ... in model order
  // Where their checked forwards' ops go: an observer of the blocks' ops (the numerics trace at
  // op level) connects here.
  std::shared_ptr<OpTraceSinkSlot> trace_sink = std::make_shared<OpTraceSinkSlot>();
};

// Routes the chosen blocks of `model` through run_recomputed() with the config's options, debug
// traces going to `debug_dir`.
CheckpointedBlocks apply_activation_checkpointing(Model model,
                                                  const ActivationCheckpointConfig& config,
                                                  const std::string& debug_dir = "");

}  // namespace titan::ac

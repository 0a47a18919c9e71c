#include "ac/apply.h"

namespace titan::ac {

std::vector<int64_t> checkpointed_layers(const ActivationCheckpointConfig& config,
                                         int64_t n_layers) {
  std::vector<int64_t> layers;
  const int64_t every = ac_block_period(config);
  if (every == 0) return layers;
  for (int64_t i = 0; i < n_layers; ++i) {
    if ((i + 1) % every == 0) layers.push_back(i);
  }
  return layers;
}

CheckpointedBlocks apply_activation_checkpointing(Model model,
                                                  const ActivationCheckpointConfig& config,
                                                  const std::string& debug_dir) {
  CheckpointedBlocks blocks;
  for (int64_t layer : checkpointed_layers(config, model->args().n_layers)) {
    RecomputeOptions options;
    options.block_name = "layers." + std::to_string(layer);
    options.preserve_rng_state = config.preserve_rng_state;
    options.check = config.determinism_check;
    options.debug = config.debug;
    options.debug_dir = debug_dir;
    options.trace_sink = blocks.trace_sink;
    model->set_block_runner(layer, [options](const BlockFunction& block, const at::Tensor& x) {
      return run_recomputed(block, x, options);
    });
    blocks.names.push_back(options.block_name);
  }
  return blocks;
}

}  // namespace titan::ac

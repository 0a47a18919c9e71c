#include "ac/apply.h"

#include "config/loader.h"
#include "util/error.h"

namespace titan {

std::vector<int64_t> checkpointed_layers(const ActivationCheckpointConfig& config,
                                         int64_t n_layers) {
  std::vector<int64_t> layers;
  if (config.mode == "none") return layers;  // the option is ignored, and may not be a number
  const auto every = config.mode == "full" ? std::optional<int64_t>(1)
                                           : selective_ac_every(config.selective_ac_option);
  if (!every) {  // validate() refuses this first; kept for callers that skip it
    throw ConfigError("activation_checkpoint.selective_ac_option",
                      "\"" + config.selective_ac_option + "\" is not a positive integer");
  }
  for (int64_t i = 0; i < n_layers; ++i) {
    if ((i + 1) % *every == 0) layers.push_back(i);
  }
  return layers;
}

std::vector<std::string> apply_activation_checkpointing(
    Transformer& model, const ActivationCheckpointConfig& config,
    std::shared_ptr<CheckpointContext> context) {
  std::vector<std::string> names;
  for (int64_t layer : checkpointed_layers(config, model->args().n_layers)) {
    CheckpointOptions options;
    options.block_name = "layers." + std::to_string(layer);
    options.preserve_rng_state = config.preserve_rng_state;
    options.check = parse_determinism_check(config.determinism_check);
    options.debug = config.debug;
    options.context = context;
    model->set_block_runner(layer, [options](const BlockFunction& block, const at::Tensor& x) {
      return checkpoint(block, x, options);
    });
    names.push_back(options.block_name);
  }
  return names;
}

}  // namespace titan

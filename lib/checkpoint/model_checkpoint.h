// Between the training objects and a checkpoint's contents: the model's parameters under their
// module names (torchtitan's Llama names: "tok_embeddings.weight", "layers.0.attention.wq.weight",
// ..., "output.weight"), and AdamW's state as tensors "<name>.exp_avg", "<name>.exp_avg_sq"
// (and "<name>.max_exp_avg_sq" with amsgrad) with per-parameter steps and per-group
// hyperparameters in the optimizer file's metadata (exact: doubles as hex floats).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/snapshot.h"
#include "config/enums.h"

namespace titan {

// The model's parameters, shared (not copied), in module order.
std::vector<NamedTensor> named_parameters(const torch::nn::Module& module);

// A full checkpoint of the current values (shared, not copied: write it before the next step).
// The config fields are left for the caller.
CheckpointContents full_checkpoint(const torch::nn::Module& module,
                                   const torch::optim::AdamW& optimizer, const TrainState& state);

// The optimizer file's metadata: its format, each group's hyperparameters and number of
// parameters (`group_sizes`), and the step of each parameter with state ("<name>.step").
struct NamedStep {
  std::string name;
  int64_t step = 0;
};
SafetensorsMetadata adamw_metadata(const std::vector<AdamWGroupSnapshot>& groups,
                                   const std::vector<size_t>& group_sizes,
                                   const std::vector<NamedStep>& steps);

// The dtype that checkpoint.export_dtype (and `titan-train export --dtype`) writes parameters in.
at::ScalarType export_scalar_type(ExportDtype dtype);

// The parameters converted to `dtype`, for a model-only save or an export.
std::vector<NamedTensor> parameters_as(const std::vector<NamedTensor>& parameters,
                                       at::ScalarType dtype);

// Checks that `tensors` are exactly `module`'s parameters by name and shape; tensors named like
// one of the module's buffers (a RoPE table) are allowed and ignored. Throws ConfigError whose
// `where` is `source`, naming the first parameter (in module order) that is missing or has
// another shape (with both shapes), else the first extra tensor.
void check_parameters_match(const torch::nn::Module& module,
                            const std::vector<NamedTensor>& tensors, const std::string& source,
                            const std::string& hint);

// Copies `tensors` into the module's parameters (converted to their dtype and device).
// Requires: check_parameters_match passed.
void load_parameters(torch::nn::Module& module, const std::vector<NamedTensor>& tensors);

// AdamW's per-parameter state in a full checkpoint's optimizer tensors (c.optimizer, with the
// rows c.optimizer_rows kept), for `params` (names and whole shapes) in order: none for a
// parameter the checkpoint has no step for. Throws RuntimeFailure naming `source` when the
// metadata is not titan-train's AdamW, or a tensor is missing or has another shape.
struct NamedSizes {
  std::string name;
  std::vector<int64_t> sizes;
};
std::vector<std::optional<AdamWParamSnapshot>> adamw_param_states(
    const CheckpointContents& c, const std::vector<NamedSizes>& params, const std::string& source);

// Restores a full checkpoint's parameters, optimizer state and hyperparameters, and nothing else
// (the TrainState is the caller's). Requires: check_parameters_match passed on c.model, and the
// optimizer holds the module's parameters. Throws RuntimeFailure naming the optimizer file when
// its tensors or metadata do not fit the optimizer; nothing is modified then.
void restore_full_checkpoint(const CheckpointContents& c, const std::string& source,
                             torch::nn::Module& module, torch::optim::AdamW& optimizer);

}  // namespace titan

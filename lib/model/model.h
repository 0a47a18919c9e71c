// What the step, activation checkpointing, the parallel component, the instruments and
// checkpoints need from a model, whatever its family: a language model as torchtitan builds one,
// an embedding, blocks in order, then a final norm and an output projection. A family (lib/llama3)
// implements ModelImpl; models/registry.h builds the one a config names.
//
// Shapes: B batch, T sequence, D dim, V vocab.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model_args.h"

namespace titan {

// Runs a block on its input. The default calls it directly; activation checkpointing replaces
// the runner of the blocks it wraps (see lib/ac).
using BlockFunction = std::function<at::Tensor(const at::Tensor&)>;
using BlockRunner = std::function<at::Tensor(const BlockFunction& block, const at::Tensor& x)>;

// Watches the forward's stage outputs (the numerics trace, lib/instruments/numerics_trace.h). The
// model calls it only when one is set: without, each stage costs one null check.
enum class ForwardStage { kEmbedding, kBlock, kNorm, kOutput };
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual void block_starting(int64_t layer) = 0;
  // `layer` is the block index for kBlock, else -1. The observer may replace `output`.
  virtual void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) = 0;
};

// The forward's units of parameters, as FSDP groups them (torchtitan's: the embedding, each
// block, the final norm with the output). A UnitHooks, when set, is called around each unit,
// outside activation checkpointing's function, so that a unit's parameters can be gathered
// before it computes and released after. A tied model (args().tie_embeddings) holds its output
// weight once, in the embedding unit: the head computes with the embedding unit's parameters too.
enum class ParamUnit { kEmbedding, kBlock, kHead };
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // `layer` is the block index for kBlock, else -1.
  virtual void unit_starting(ParamUnit unit, int64_t layer) = 0;
  // Returns the tensor the forward continues with (`output`, or one that stands for it).
  virtual at::Tensor unit_finished(ParamUnit unit, int64_t layer, const at::Tensor& output) = 0;
};

// How a model's parameters are built. By default on the CPU, holding memory (moved with to()).
// shape_only: on `device`, holding none (model/param_storage.h), so that a rank that keeps only
// its rows of them (FSDP) never holds the whole model. Each layer is still made as libtorch makes
// it (its default initialization draws from the CPU generator, and torchtitan's init follows
// those draws), its memory released before the next layer is made: the peak is one layer.
struct ParamMemory {
  bool shape_only = false;
  c10::Device device = c10::kCPU;
};

// Where init_weights puts the starting values of a parameter that holds no memory:
// keep(name, values), the parameter's whole values (valid during the call only).
using StartingValues = std::function<void(const std::string& name, const at::Tensor& values)>;

// An MoE layer's routing state (lib/moe), sharing the layer's tensors (in-place updates reach
// the layer).
struct ExpertLoad {
  std::string name;              // torchtitan's module name: "layers.3.moe"
  at::Tensor tokens_per_expert;  // float32 (E): routed by this step's training forwards so far
  at::Tensor expert_bias;        // float32 (E), added to the scores for the choice only; undefined
                                 // without load balancing
  double load_balance_coeff = 0;
  bool update_expert_bias = false;  // whether the step updates expert_bias (moe/load_balance.h)
};

class ModelImpl : public torch::nn::Module {
 public:
  // tokens: (B, T) int64 -> logits (B, T, V). Requires T <= args().max_seq_len. Calls the unit
  // hooks around each unit and the observer after each stage; runs each block through its runner.
  at::Tensor forward(const at::Tensor& tokens);
  // torchtitan's init for the family, drawing from the default generator of the parameters'
  // device. A parameter that holds memory is set in place; one that holds none
  // (ParamMemory::shape_only) is drawn whole into a temporary, one parameter at a time, and
  // handed to `keep` (required then): the values are the same bits either way.
  virtual void init_weights(const StartingValues& keep = {}) = 0;
  // The parameters of one unit (`layer`: the block index for kBlock, else ignored), in
  // named_parameters() order.
  virtual std::vector<at::Tensor> unit_parameters(ParamUnit unit, int64_t layer) const = 0;
  const ModelArgs& args() const { return args_; }
  int64_t n_blocks() const { return args_.n_layers; }
  // Each MoE layer's routing state, in block order (none for a dense model).
  virtual std::vector<ExpertLoad> expert_loads() const { return {}; }

  // Runs block `layer` through `runner` from now on (an empty runner restores the default).
  void set_block_runner(int64_t layer, BlockRunner runner);
  // Calls `observer` from every forward from now on (null: none).
  void set_forward_observer(std::shared_ptr<ForwardObserver> observer) {
    observer_ = std::move(observer);
  }
  // Calls `hooks` around every unit of every forward from now on (null: none).
  void set_unit_hooks(std::shared_ptr<UnitHooks> hooks) { unit_hooks_ = std::move(hooks); }

 protected:
  explicit ModelImpl(const ModelArgs& args);
  // The family's stages. embed: (B, T) -> (B, T, D); final_norm: (B, T, D) -> (B, T, D);
  // project: (B, T, D) -> (B, T, V).
  virtual at::Tensor embed(const at::Tensor& tokens) = 0;
  // Block `layer` as a function of its input (B, T, D) -> (B, T, D). The function shares
  // ownership of what it uses: a checkpointed block's function lives until its backward.
  virtual BlockFunction block_function(int64_t layer) = 0;
  virtual at::Tensor final_norm(const at::Tensor& h) = 0;
  virtual at::Tensor project(const at::Tensor& h) = 0;

 private:
  ModelArgs args_;
  std::vector<BlockRunner> runners_;
  std::vector<std::string> block_names_;  // "layers.3": each block's profiler span
  std::shared_ptr<ForwardObserver> observer_;
  std::shared_ptr<UnitHooks> unit_hooks_;
};
TORCH_MODULE(Model);

// torch.nn.init.trunc_normal_: normal(mean, std) truncated to the absolute range [a, b].
void trunc_normal_(at::Tensor& tensor, double mean, double std, double a, double b);

}  // namespace titan

// Llama 3 as torchtitan builds it, as libtorch modules.
//
// Shapes: B batch, T sequence, D dim, H heads, K kv heads, E head_dim, V vocab.
// Parameter names match torchtitan's: tok_embeddings.weight, layers.0.attention.wq.weight, ...,
// layers.0.feed_forward.w1.weight, layers.0.attention_norm.weight, norm.weight, output.weight.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model_args.h"

namespace titan {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);  // (..., D) -> (..., D)
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// Rotary embedding table (complex, (T, E/2)) with Llama 3.1 frequency scaling.
at::Tensor precompute_freqs_cis(int64_t head_dim, int64_t max_seq_len, double theta,
                                const RopeScaling& scaling);

// Rotates interleaved pairs (2i, 2i+1) of x: (B, T, H, E) by freqs_cis: (T, E/2) complex.
at::Tensor apply_rotary_emb(const at::Tensor& x, const at::Tensor& freqs_cis);

// (B, T, K, E) -> (B, T, K * n_rep, E); kv head j serves query heads j*n_rep ... j*n_rep+n_rep-1.
at::Tensor repeat_kv(const at::Tensor& x, int64_t n_rep);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);  // (B, T, D) -> (B, T, D)
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t dim, int64_t hidden_dim);
  at::Tensor forward(const at::Tensor& x);  // w2(silu(w1(x)) * w3(x))
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(FeedForward);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int64_t layer_id, const ModelArgs& args);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& freqs_cis);  // (B, T, D)
  // torchtitan's init; `weight_init_std` is the std of wo, w2 and w3. `init(param, fill)` runs
  // each fill on the parameter's values (TransformerImpl::init_weights says where they go).
  using ParamInit = std::function<void(at::Tensor& param, const std::function<void(at::Tensor&)>&)>;
  void init_weights(double weight_init_std, const ParamInit& init);
  int64_t layer_id() const { return layer_id_; }
  Attention attention{nullptr};
  FeedForward feed_forward{nullptr};
  RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};

 private:
  int64_t layer_id_;
  double dropout_;
};
TORCH_MODULE(TransformerBlock);

// Runs a block on its input. The default calls it directly; activation checkpointing replaces
// the runner of the blocks it wraps (see lib/ac).
using BlockFunction = std::function<at::Tensor(const at::Tensor&)>;
using BlockRunner = std::function<at::Tensor(const BlockFunction& block, const at::Tensor& x)>;

// Watches the forward's stage outputs (the numerics trace, lib/train/numerics_trace.h). The
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
// before it computes and released after.
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

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelArgs& args, const ParamMemory& memory = {});
  // tokens: (B, T) int64 -> logits (B, T, V). Requires T <= args.max_seq_len.
  at::Tensor forward(const at::Tensor& tokens);
  // torchtitan's init, drawing from the default generator of the parameters' device. A parameter
  // that holds memory is set in place; one that holds none (ParamMemory::shape_only) is drawn
  // whole into a temporary, one parameter at a time, and handed to `keep` (required then): the
  // values are the same bits either way.
  void init_weights(const StartingValues& keep = {});
  const ModelArgs& args() const { return args_; }

  // Runs block `layer` through `runner` from now on (an empty runner restores the default).
  void set_block_runner(int64_t layer, BlockRunner runner);
  // Calls `observer` from every forward from now on (null: none).
  void set_forward_observer(std::shared_ptr<ForwardObserver> observer) {
    observer_ = std::move(observer);
  }
  // Calls `hooks` around every unit of every forward from now on (null: none).
  void set_unit_hooks(std::shared_ptr<UnitHooks> hooks) { unit_hooks_ = std::move(hooks); }

  torch::nn::Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear output{nullptr};

 private:
  ModelArgs args_;
  at::Tensor freqs_cis_;  // buffer, not saved (torchtitan: persistent=False)
  std::vector<BlockRunner> runners_;
  std::vector<std::string> block_names_;  // "layers.3": each block's profiler span
  std::shared_ptr<ForwardObserver> observer_;
  std::shared_ptr<UnitHooks> unit_hooks_;
};
TORCH_MODULE(Transformer);

// torch.nn.init.trunc_normal_: normal(mean, std) truncated to the absolute range [a, b].
void trunc_normal_(at::Tensor& tensor, double mean, double std, double a, double b);

}  // namespace titan

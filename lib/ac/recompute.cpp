#include "ac/recompute.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include <optional>

#include "ac/op_trace.h"
#include "ac/recompute_check.h"
#include "determinism/rng_state.h"
#include "model/recompute_scope.h"
#include "util/autocast.h"
#include "util/hash.h"

namespace titan::ac {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Generator states of the CPU and of the CUDA device the block ran on.
struct RngStates {
  at::Tensor cpu;
  std::optional<c10::Device> cuda_device;
  at::Tensor cuda;
};

RngStates capture_rng(const at::Tensor& x) {
  RngStates s;
  s.cpu = generator_state(c10::Device(c10::kCPU));
  if (x.is_cuda()) {
    s.cuda_device = x.device();
    s.cuda = generator_state(x.device());
  }
  return s;
}

void restore_rng(const RngStates& s) {
  set_generator_state(c10::Device(c10::kCPU), s.cpu);
  if (s.cuda_device) set_generator_state(*s.cuda_device, s.cuda);
}

// Sets the forward's RNG states for the recomputation and puts the surrounding ones back after
// (torch.random.fork_rng semantics).
class ForkedRng {
 public:
  ForkedRng(const RngStates& forward, const at::Tensor& x) : surrounding_(capture_rng(x)) {
    restore_rng(forward);
  }
  ~ForkedRng() { restore_rng(surrounding_); }

 private:
  RngStates surrounding_;
};

// Everything the backward needs, owned by the autograd graph.
struct CheckpointState : torch::CustomClassHolder {
  BlockFunction block;
  RecomputeOptions options;
  std::optional<RngStates> rng;
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kBFloat16;
  OpTrace forward_trace;
  uint64_t forward_output_checksum = 0;
};

[[maybe_unused]] const auto kRegistered =
    torch::class_<CheckpointState>("titan", "CheckpointState");

// Runs the block while recording its ops when the check needs them; `for_observer` also records
// what an OpTraceSink wants (checksums, max |value|).
at::Tensor run_recorded(CheckpointState& s, const at::Tensor& x, OpTrace& trace,
                        bool for_observer = false) {
  trace.checksums = s.options.check == RecomputeCheck::kBitwise || for_observer;
  trace.max_abs = for_observer;
  trace.capture_inputs = s.options.debug;
  if (s.options.check == RecomputeCheck::kNone) return s.block(x);
  TraceRecorder recorder(trace);
  TraceRecorder::name_tensor(trace, x);
  return s.block(x);
}

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, at::Tensor x,
                               c10::intrusive_ptr<CheckpointState> state) {
    if (state->options.preserve_rng_state) state->rng = capture_rng(x);
    state->autocast = autocast_enabled(x.device().type());
    state->autocast_dtype = autocast_dtype(x.device().type());
    // Grad is off here (Function::apply), so no activations are kept.
    OpTraceSink* sink = state->options.trace_sink ? state->options.trace_sink->sink() : nullptr;
    const bool observed = sink && sink->wants_ops();
    at::Tensor out = run_recorded(*state, x, state->forward_trace, observed);
    if (observed && state->options.check != RecomputeCheck::kNone) {
      sink->add_ops(state->forward_trace.ops);
    }
    if (state->options.check == RecomputeCheck::kBitwise) {
      state->forward_output_checksum = tensor_checksum(out);
    }
    ctx->save_for_backward({x});
    ctx->saved_data["state"] = state;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = ctx->saved_data["state"].toCustomClass<CheckpointState>();
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor out;
    OpTrace recompute_trace;
    {
      std::optional<ForkedRng> rng;
      if (state->rng) rng.emplace(*state->rng, x);
      AutocastScope autocast(x.device().type(), state->autocast, state->autocast_dtype);
      at::AutoGradMode enable_grad(true);
      RecomputeScope recomputing;
      out = run_recorded(*state, x, recompute_trace);
    }
    check_recompute(*state, recompute_trace, out);
    torch::autograd::backward({out}, {grad_outputs[0]});
    return {x.grad(), at::Tensor()};
  }

  static void check_recompute(const CheckpointState& s, const OpTrace& recomputed,
                              const at::Tensor& out) {
    if (s.options.check == RecomputeCheck::kNone) return;
    RecomputeComparison c;
    c.block_name = s.options.block_name;
    c.check = s.options.check;
    c.forward = &s.forward_trace;
    c.recompute = &recomputed;
    if (s.options.check == RecomputeCheck::kBitwise) {
      c.forward_output_checksum = s.forward_output_checksum;
      c.recompute_output_checksum = tensor_checksum(out.detach());
    }
    c.debug = s.options.debug;
    c.debug_dir = s.options.debug_dir;
    raise_on_mismatch(c);
  }
};

}  // namespace

at::Tensor run_recomputed(const BlockFunction& block, const at::Tensor& x,
                          const RecomputeOptions& options) {
  if (!at::GradMode::is_enabled() || !x.requires_grad()) return block(x);
  auto state = c10::make_intrusive<CheckpointState>();
  state->block = block;
  state->options = options;
  return CheckpointFunction::apply(x, state)[0];
}

}  // namespace titan::ac

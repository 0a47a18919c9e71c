#include "instruments/precision_probe.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <cstring>
#include <ostream>
#include <unordered_map>

#include "ac/op_trace.h"
#include "model/observed_op.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "util/autocast.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

at::ScalarType reference_dtype(PrecisionReference reference) {
  return reference == PrecisionReference::kFloat64 ? at::kDouble : at::kFloat;
}

bool holds_reals(const at::Tensor& t) {
  return t.defined() && (t.is_floating_point() || t.is_complex());
}

std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

// Observes a model copy's forwards: every block's top-level ops (inputs and outputs kept), each
// forward (micro-batch) separately, and the first forward's block outputs and logits.
class ExecutionRecorder : public ForwardObserver, public StepObserver {
 public:
  ExecutionRecorder(int64_t layers, int64_t step, std::shared_ptr<BlockOutputHook> hook)
      : layers_(layers), step_(step), hook_(std::move(hook)) {}

  void forward_starting(int64_t) override { blocks.emplace_back(static_cast<size_t>(layers_)); }

  void block_starting(int64_t layer) override {
    ac::OpTrace& trace = blocks.back().at(static_cast<size_t>(layer));
    trace.keep_values = true;
    recorder_ = std::make_unique<ac::TraceRecorder>(trace);
  }

  void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) override {
    const bool first = blocks.size() == 1;
    if (stage == ForwardStage::kBlock) {
      if (hook_) hook_->on_block_output(step_, layer, output);  // inside the block's trace
      recorder_.reset();
      if (first) block_outputs.push_back(output.detach());
    } else if (stage == ForwardStage::kOutput && first) {
      logits = output.detach();
    }
  }

  std::vector<std::vector<ac::OpTrace>> blocks;  // [micro-batch][layer]
  std::vector<at::Tensor> block_outputs;
  at::Tensor logits;

 private:
  int64_t layers_, step_;
  std::shared_ptr<BlockOutputHook> hook_;
  std::unique_ptr<ac::TraceRecorder> recorder_;
};

std::vector<const ac::OpRecord*> top_level_ops(const ac::OpTrace& trace) {
  std::vector<const ac::OpRecord*> out;
  for (const auto& op : trace.ops) {
    if (op.top_level) out.push_back(&op);
  }
  return out;
}

}  // namespace

struct PrecisionProbe::Execution {
  std::shared_ptr<ExecutionRecorder> recorder;
  double loss = 0;
  double grad_norm = 0;  // as the run computes it (grad_norm_accumulate)
  std::vector<std::pair<std::string, at::Tensor>> grads;
};

namespace {

// The op `ref` recorded, run alone in the run's dtypes: each floating input of the reference
// execution rounded to the dtype the run's op received there, under the run's autocast.
at::Tensor run_alone(const ac::OpRecord& run, const ac::OpRecord& ref, const StepOptions& options) {
  std::vector<c10::IValue> inputs;
  for (size_t k = 0; k < ref.inputs.size(); ++k) {
    const c10::IValue& in = ref.inputs[k];
    if (in.isTensor() && holds_reals(in.toTensor()) && k < run.inputs.size() &&
        run.inputs[k].isTensor() && run.inputs[k].toTensor().defined()) {
      inputs.emplace_back(in.toTensor().to(run.inputs[k].toTensor().scalar_type()));
    } else {
      inputs.push_back(in);
    }
  }
  at::NoGradGuard no_grad;
  at::DisableRecordFunctionGuard unrecorded;
  AutocastScope autocast(options.device.type(), options.autocast_bf16, at::kBFloat16);
  if (is_observed_op(ref.name)) return run_observed_op(ref.name, inputs);
  if (!ref.schema) return {};
  auto handle = c10::Dispatcher::singleton().findSchema(*ref.schema);
  if (!handle) return {};
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  handle->callBoxed(stack);
  return !stack.empty() && stack[0].isTensor() ? stack[0].toTensor() : at::Tensor();
}

ScalarPrecision compare_scalar(double run, double reference) {
  ScalarPrecision s;
  s.run = run;
  s.reference = reference;
  s.rel_error =
      reference != 0 ? std::abs(run - reference) / std::abs(reference) : std::abs(run - reference);
  return s;
}

}  // namespace

PrecisionProbe::PrecisionProbe(const Config& config, const RunFolder& folder, const ModelArgs& args,
                               const StepOptions& options)
    : config_(config),
      folder_(folder),
      args_(args),
      options_(options),
      steps_(config.debug.precision_steps.begin(), config.debug.precision_steps.end()) {
  options_.data_parallel = 1;
}

void PrecisionProbe::open_outputs(int64_t) { folder_.make(RunSubfolder::kPrecision); }

void PrecisionProbe::before_step(StepContext& context) {
  kept_ = keep_state(context.engine.target().model);
}

void PrecisionProbe::after_step(StepContext& context, StepOutcome& outcome) {
  measure(context.step, *kept_, context.batches, outcome, context.console);
  kept_.reset();
}

std::string PrecisionProbe::cost_line(const RunTotals& totals) const {
  if (cost_.count == 0 || totals.steps == 0) return "";
  // The run's own steps, without the time the precision steps' executions took.
  const double step_seconds = (totals.seconds - cost_.seconds) / static_cast<double>(totals.steps);
  return fmt::format(
      "precision steps: {:.2f} s each ({} step{}), {:.1f}x a step's {:.3f} s on "
      "average",
      cost_.per_count(), cost_.count, cost_.count == 1 ? "" : "s",
      step_seconds > 0 ? cost_.per_count() / step_seconds : 0.0, step_seconds);
}

PrecisionProbe::KeptState PrecisionProbe::keep_state(const Model& model) const {
  at::NoGradGuard no_grad;
  KeptState kept;
  for (const auto& item : model->named_parameters()) {
    kept.params.emplace_back(item.key(), item.value().detach().clone());
  }
  for (const ExpertLoad& load : model->expert_loads()) {
    if (load.expert_bias.defined())
      kept.buffers[load.name + ".expert_bias"] = load.expert_bias.detach().cpu().clone();
  }
  kept.rng = capture_rng_state();
  return kept;
}

PrecisionProbe::Execution PrecisionProbe::execute(int64_t step, const KeptState& before,
                                                  const std::vector<Batch>& batches,
                                                  bool reference) const {
  const at::ScalarType dtype =
      reference ? reference_dtype(config_.debug.precision_reference) : at::kFloat;
  Model model = build_model(args_);  // its random init is overwritten below
  model->to(options_.device);
  {
    at::NoGradGuard no_grad;
    std::unordered_map<std::string, at::Tensor> kept(before.params.begin(), before.params.end());
    for (auto& item : model->named_parameters()) {
      item.value().set_data(kept.at(item.key()).to(options_.device, dtype, false, true));
    }
    // The routing state stays float32, as the run's (torchtitan's expert_bias is a float32
    // buffer whatever the model's dtype).
    for (const ExpertLoad& load : model->expert_loads()) {
      if (!load.expert_bias.defined()) continue;
      auto it = before.buffers.find(load.name + ".expert_bias");
      if (it == before.buffers.end()) {
        throw RuntimeFailure(
            fmt::format("the kept state of step {} has no {}.expert_bias", step, load.name));
      }
      load.expert_bias.copy_(it->second);
    }
  }
  Execution e;
  e.recorder = std::make_shared<ExecutionRecorder>(args_.n_layers, step, hook_);
  model->set_forward_observer(e.recorder);
  StepOptions options = options_;
  if (reference) options.autocast_bf16 = false;
  StepTarget target;
  target.model = model;
  target.params = model->parameters();
  StepRequest request;
  request.step = step;
  request.batches = &batches;
  request.mode = StepMode::kGradients;
  request.loss_dtype = reference ? dtype : at::kFloat;
  restore_rng_state(before.rng);
  const StepOutcome outcome = run_step(target, options, request, {e.recorder.get()});
  e.loss = outcome.loss;
  e.grad_norm = outcome.grad_norm;
  model->set_forward_observer(nullptr);
  for (const auto& item : model->named_parameters()) {
    e.grads.emplace_back(item.key(), item.value().grad());
  }
  return e;
}

PrecisionReport PrecisionProbe::measure(int64_t step, const KeptState& before,
                                        const std::vector<Batch>& batches, const StepOutcome& run,
                                        std::ostream& console) {
  PrecisionReport r = attribute(step, before, batches, &run);
  for (const auto& note : r.notes) console << "[titan] " << note << "\n";
  cost_.seconds += r.seconds;
  ++cost_.count;
  write_files(r);
  console << format_precision_summary(r);
  console.flush();
  return r;
}

PrecisionReport PrecisionProbe::attribute(int64_t step, const KeptState& before,
                                          const std::vector<Batch>& batches,
                                          const StepOutcome* run_outcome) {
  const auto start = SteadyClock::now();
  const RngState rng_after_step = capture_rng_state();
  Execution again = execute(step, before, batches, false);
  Execution ref = execute(step, before, batches, true);
  StepOutcome as_run;
  as_run.loss = again.loss;
  as_run.grad_norm = again.grad_norm;
  const StepOutcome& run = run_outcome ? *run_outcome : as_run;

  PrecisionReport r;
  r.step = step;
  r.dtype = options_.autocast_bf16 ? "bfloat16" : "float32";
  r.reference = to_string(config_.debug.precision_reference);
  r.grad_norm_accumulate = to_string(options_.grad_norm_accumulate);

  std::vector<at::Tensor> run_grads, ref_grads;
  for (size_t i = 0; i < again.grads.size(); ++i) {
    run_grads.push_back(again.grads[i].second);
    ref_grads.push_back(ref.grads[i].second);
  }
  const double again_norm = again.grad_norm;
  r.reexecution_bitwise = same_bits(again.loss, run.loss) && same_bits(again_norm, run.grad_norm);
  r.loss = compare_scalar(run.loss, ref.loss);
  r.grad_norm =
      compare_scalar(run.grad_norm, gradient_norm(ref_grads, GradNormAccumulate::kFloat64));
  r.grad_norm_exact_sum = gradient_norm(run_grads, GradNormAccumulate::kFloat64);
  for (size_t i = 0; i < run_grads.size(); ++i) {
    GradientPrecision g;
    g.name = again.grads[i].first;
    if (!run_grads[i].defined() || !ref_grads[i].defined()) continue;
    g.error = relative_error(run_grads[i], ref_grads[i]);
    g.checksum = tensor_checksum(run_grads[i].contiguous());
    const double summed = gradient_norm({run_grads[i]}, options_.grad_norm_accumulate);
    const double exact = gradient_norm({run_grads[i]}, GradNormAccumulate::kFloat64);
    g.norm_rel_error = exact > 0 ? (summed - exact) / exact : 0.0;
    // d(total) = sum_p n_p d(n_p) / total, to first order.
    const double total_error = again_norm - r.grad_norm_exact_sum;
    if (total_error != 0 && r.grad_norm_exact_sum > 0)
      g.norm_error_share = exact * (summed - exact) / r.grad_norm_exact_sum / total_error;
    r.gradients.push_back(std::move(g));
  }

  for (size_t m = 0; m < again.recorder->blocks.size(); ++m) {
    for (size_t b = 0; b < again.recorder->blocks[m].size(); ++b) {
      const auto run_ops = top_level_ops(again.recorder->blocks[m][b]);
      const auto ref_ops = top_level_ops(ref.recorder->blocks.at(m).at(b));
      for (size_t i = 0; i < run_ops.size() && i < ref_ops.size(); ++i) {
        const ac::OpRecord& a = *run_ops[i];
        const ac::OpRecord& x = *ref_ops[i];
        if (std::strcmp(a.name, x.name) != 0) {
          r.notes.push_back(fmt::format(
              "precision step {}: layers.{} op #{} is {} in the run but {} in the reference: the "
              "block's later ops are not compared",
              step, b, i, a.name, x.name));
          break;
        }
        if (!holds_reals(a.value) || !holds_reals(x.value) || a.value.sizes() != x.value.sizes())
          continue;
        OpPrecision op;
        op.micro_batch = static_cast<int64_t>(m);
        op.block = static_cast<int64_t>(b);
        op.index = static_cast<int64_t>(i);
        op.name = a.name;
        op.dtype = ac::dtype_abbreviation(a.value.scalar_type());
        op.shape = shape_of(a.value);
        op.error = relative_error(a.value, x.value);
        op.checksum = tensor_checksum(a.value.contiguous());
        op.norm = a.value.to(at::kDouble).norm().item<double>();
        const at::Tensor alone = run_alone(a, x, options_);
        if (alone.defined() && alone.sizes() == x.value.sizes())
          op.added = relative_error(alone, x.value);
        r.ops.push_back(std::move(op));
      }
    }
  }
  for (size_t b = 0; b < again.recorder->block_outputs.size(); ++b) {
    r.blocks.push_back(
        relative_error(again.recorder->block_outputs[b], ref.recorder->block_outputs.at(b)));
  }
  r.logits = relative_error(again.recorder->logits, ref.recorder->logits);
  find_worst_op(r);
  restore_rng_state(rng_after_step);
  r.seconds = seconds_since(start);
  return r;
}

void PrecisionProbe::write_files(const PrecisionReport& report) const {
  folder_.make(RunSubfolder::kPrecision);
  const std::string base = fmt::format("step{}", report.step);
  write_file_atomically(folder_.report(RunSubfolder::kPrecision, base + ".txt"),
                        format_precision_text(report));
  write_file_atomically(folder_.report(RunSubfolder::kPrecision, base + ".json"),
                        format_precision_json(report));
}

}  // namespace titan

#include "train/numerics_trace.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "metrics/numerics_log.h"
#include "util/error.h"
#include "util/files.h"

namespace titan {
namespace {

const char* stage_name(ForwardStage stage) {
  switch (stage) {
    case ForwardStage::kEmbedding:
      return "tok_embeddings";
    case ForwardStage::kNorm:
      return "norm";
    case ForwardStage::kOutput:
      return "output";
    case ForwardStage::kBlock:
      break;
  }
  return "layers";
}

OpOutputText op_output_text(const ac::OutputMeta& m) {
  OpOutputText o;
  o.meta = ac::describe_meta(m);
  o.meta.erase(std::remove(o.meta.begin(), o.meta.end(), ' '), o.meta.end());
  o.hashed = m.hashed;
  o.checksum = m.checksum;
  o.max_abs = at::isFloatingType(m.dtype) ? fmt::format("{:a}", m.max_abs) : "-";
  return o;
}

// numerics.log at level "blocks" has no op lines, even for a step also captured at op level.
std::string without_op_lines(const std::string& text) {
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    end = end == std::string::npos ? text.size() : end + 1;
    if (text.compare(begin, 3, "op ") != 0) out.append(text, begin, end - begin);
    begin = end;
  }
  return out;
}

}  // namespace

NumericsTracer::NumericsTracer(NumericsTrace level, int64_t freq,
                               std::shared_ptr<ac::CheckpointContext> ac_context)
    : level_(level), freq_(freq), ac_context_(std::move(ac_context)) {}

void NumericsTracer::open(const std::string& path, int64_t resume_step) {
  const std::string header = numerics_header(to_string(level_), freq_);
  if (resume_step > 0) {
    rewrite_log_through_step(path, header, resume_step);
    file_ = std::make_unique<LineFile>(path, LineFile::Mode::kAppend);
  } else {
    file_ = std::make_unique<LineFile>(path, LineFile::Mode::kTruncate);
    file_->write(header);
  }
}

NumericsTracer::~NumericsTracer() = default;

void NumericsTracer::attach(Transformer& model) {
  params_.clear();
  for (const auto& item : model->named_parameters()) params_.emplace_back(item.key(), item.value());
  std::reverse(params_.begin(), params_.end());
}

void NumericsTracer::begin_step(int64_t step, bool capture_ops, bool write_log) {
  step_ = step;
  logging_ = write_log && level_ != NumericsTrace::kNone && step % freq_ == 0;
  tracing_ = logging_ || capture_ops;
  ops_ = capture_ops || (logging_ && level_ == NumericsTrace::kOps);
  micro_ = -1;
  lines_.clear();
}

void NumericsTracer::set_test_perturbation(int64_t step, int64_t layer, int ulps) {
  perturbation_ = Perturbation{step, layer, ulps > 0 ? Fault::kUlp : Fault::kNone};
}

void NumericsTracer::set_test_infinity(int64_t step, int64_t layer) {
  perturbation_ = Perturbation{step, layer, Fault::kInfinity};
}

void NumericsTracer::set_test_fault_once() {
  if (perturbation_) perturbation_->once = true;
}

void NumericsTracer::block_starting(int64_t /*layer*/) {
  if (!tracing_ || !ops_) return;
  trace_ = ac::OpTrace();
  trace_.checksums = true;
  trace_.max_abs = true;
  recorder_ = std::make_unique<ac::TraceRecorder>(trace_);
  if (ac_context_) ac_context_->observer_trace = &trace_;
}

void NumericsTracer::perturb(at::Tensor& output) {
  const bool fire = !(perturbation_->once && perturbation_->fired);
  perturbation_->fired = true;
  const Fault fault = fire ? perturbation_->fault : Fault::kNone;
  at::Tensor x = output.detach();
  if (perturbation_->fault == Fault::kInfinity) {  // the same ops whether it fires or not
    at::Tensor delta;
    {
      at::DisableRecordFunctionGuard not_traced;
      at::NoGradGuard no_grad;
      delta = at::zeros_like(x);
      if (fault == Fault::kInfinity) delta.view(-1)[0] = INFINITY;
    }
    output = output + delta;
    return;
  }
  at::Tensor target;
  {
    at::DisableRecordFunctionGuard not_traced;
    at::NoGradGuard no_grad;
    target = fault == Fault::kUlp ? at::full_like(output, INFINITY) : x;
  }
  output = output + (at::nextafter(x, target) - x);
}

void NumericsTracer::stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) {
  const bool perturbed = perturbation_ && stage == ForwardStage::kBlock &&
                         perturbation_->step == step_ && perturbation_->layer == layer;
  if (perturbed) perturb(output);
  if (!tracing_) return;
  std::string name = stage_name(stage);
  if (stage == ForwardStage::kBlock) name += "." + std::to_string(layer);
  if (stage == ForwardStage::kEmbedding) {
    lines_ += fmt::format("step {} micro {}\n", step_, ++micro_);
  }
  if (recorder_) {
    recorder_.reset();
    if (ac_context_) ac_context_->observer_trace = nullptr;
    write_ops(name);
  }
  lines_ += format_forward_line(name, tensor_stats(output)) + "\n";
}

void NumericsTracer::write_ops(const std::string& block) {
  for (size_t i = 0; i < trace_.ops.size(); ++i) {
    const ac::OpRecord& op = trace_.ops[i];
    if (!op.top_level) continue;  // reflected in its caller's output
    std::vector<OpOutputText> outputs;
    for (const auto& m : op.outputs) outputs.push_back(op_output_text(m));
    lines_ += format_op_line(block, static_cast<int64_t>(i), op.name, outputs) + "\n";
  }
}

void NumericsTracer::record_gradients() {
  if (!tracing_) return;
  lines_ += fmt::format("step {} grads\n", step_);
  for (const auto& [name, param] : params_) {
    const at::Tensor& grad = param.grad();
    lines_ +=
        format_gradient_line(name, tensor_stats(grad.defined() ? grad : at::zeros_like(param))) +
        "\n";
  }
}

std::string NumericsTracer::end_step() {
  if (!tracing_) return "";
  tracing_ = false;
  std::string text = lines_ + fmt::format("end step {}\n", step_);
  lines_.clear();
  if (logging_) file_->write(level_ == NumericsTrace::kOps ? text : without_op_lines(text));
  return text;
}

std::shared_ptr<NumericsTracer> make_numerics_tracer(
    NumericsTrace level, int64_t freq, Transformer& model, bool for_reruns,
    std::shared_ptr<ac::CheckpointContext> ac_context) {
  if (level == NumericsTrace::kNone && !for_reruns) return nullptr;
  auto tracer = std::make_shared<NumericsTracer>(level, freq, std::move(ac_context));
  tracer->attach(model);
  model->set_forward_observer(tracer);
  return tracer;
}

void open_numerics_log(NumericsTracer* tracer, const std::string& dump_folder, int64_t resume_step,
                       int64_t rank) {
  const std::string path = dump_folder + "/" + rank_file_name("numerics.log", rank);
  if (tracer && tracer->writes_log()) return tracer->open(path, resume_step);
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace titan

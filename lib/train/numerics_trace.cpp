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

}  // namespace

NumericsTracer::NumericsTracer(NumericsTrace level, int64_t freq) : level_(level), freq_(freq) {}

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

void NumericsTracer::begin_step(int64_t step) {
  step_ = step;
  tracing_ = step % freq_ == 0;
  micro_ = -1;
  lines_.clear();
}

void NumericsTracer::set_test_perturbation(int64_t step, int64_t layer, int ulps) {
  perturbation_ = Perturbation{step, layer, ulps};
}

void NumericsTracer::block_starting(int64_t /*layer*/) {
  if (!tracing_ || level_ != NumericsTrace::kOps) return;
  ops_ = ac::OpTrace();
  ops_.checksums = true;
  ops_.max_abs = true;
  recorder_ = std::make_unique<ac::TraceRecorder>(ops_);
}

void NumericsTracer::perturb(at::Tensor& output) const {
  at::Tensor target;
  {
    at::DisableRecordFunctionGuard not_traced;
    at::NoGradGuard no_grad;
    target = perturbation_->ulps > 0 ? at::full_like(output, INFINITY) : output.detach();
  }
  at::Tensor x = output.detach();
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
    write_ops(name);
  }
  lines_ += format_forward_line(name, tensor_stats(output)) + "\n";
}

void NumericsTracer::write_ops(const std::string& block) {
  for (size_t i = 0; i < ops_.ops.size(); ++i) {
    const ac::OpRecord& op = ops_.ops[i];
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

void NumericsTracer::end_step() {
  if (!tracing_) return;
  file_->write(lines_ + fmt::format("end step {}\n", step_));
  lines_.clear();
}

std::shared_ptr<NumericsTracer> make_numerics_tracer(NumericsTrace level, int64_t freq,
                                                     Transformer& model) {
  if (level == NumericsTrace::kNone) return nullptr;
  auto tracer = std::make_shared<NumericsTracer>(level, freq);
  tracer->attach(model);
  model->set_forward_observer(tracer);
  return tracer;
}

void open_numerics_log(NumericsTracer* tracer, const std::string& dump_folder,
                       int64_t resume_step) {
  const std::string path = dump_folder + "/numerics.log";
  if (tracer) return tracer->open(path, resume_step);
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace titan

#include "instruments/numerics_trace.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "instruments/rerun.h"
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

OpOutput op_output(const ac::OutputMeta& m) {
  OpOutput o;
  o.dtype = ac::dtype_abbreviation(m.dtype);
  o.sizes.assign(m.sizes.begin(), m.sizes.end());
  if (!m.device.is_cpu()) o.device = m.device.str();
  o.hashed = m.hashed;
  o.checksum = m.checksum;
  if (m.hashed && at::isFloatingType(m.dtype)) o.max_abs = m.max_abs;
  return o;
}

}  // namespace

NumericsTracer::NumericsTracer(NumericsTrace level, int64_t freq, std::string log_path,
                               std::set<int64_t> op_steps)
    : level_(level), freq_(freq), log_path_(std::move(log_path)), op_steps_(std::move(op_steps)) {}

void NumericsTracer::open_outputs(int64_t resume_step) {
  if (writes_log()) open(log_path_, resume_step);
}

void NumericsTracer::step_starting(const StepRequest& request) {
  const bool again = trace_next_;
  trace_next_ = false;
  captured_ = again || op_steps_.count(request.step) > 0;
  begin_step(request.step, captured_, !again);
}

void NumericsTracer::gradients_ready(const StepRequest&) {
  if (tracing_) record_gradients();
}

void NumericsTracer::step_finished(const StepRequest&, StepOutcome& outcome) {
  std::optional<NumericsStep> record = end_step();
  if (captured_ && record) outcome.findings.put(std::move(*record));
}

std::string NumericsTracer::describe() const {
  if (!writes_log()) return "";
  return fmt::format("numerics trace: {} every {} steps into numerics.log", to_string(level_),
                     freq_);
}

void NumericsTracer::open(const std::string& path, int64_t resume_step) {
  const std::string header = numerics_header(to_string(level_), freq_);
  if (resume_step > 0) {
    rewrite_log_through_step(path, header, resume_step, numerics_line_step);
    file_ = std::make_unique<LineFile>(path, LineFile::Mode::kAppend);
  } else {
    file_ = std::make_unique<LineFile>(path, LineFile::Mode::kTruncate);
    file_->write(header);
  }
}

NumericsTracer::~NumericsTracer() = default;

void NumericsTracer::attach(Model& model) {
  params_.clear();
  for (const auto& item : model->named_parameters()) params_.emplace_back(item.key(), item.value());
  std::reverse(params_.begin(), params_.end());
}

void NumericsTracer::begin_step(int64_t step, bool capture_ops, bool write_log) {
  logging_ = write_log && level_ != NumericsTrace::kNone && step % freq_ == 0;
  tracing_ = logging_ || capture_ops;
  ops_ = capture_ops || (logging_ && level_ == NumericsTrace::kOps);
  micro_ = -1;
  record_ = NumericsStep();
  record_.step = step;
}

void NumericsTracer::block_starting(int64_t /*layer*/) {
  if (!tracing_ || !ops_) return;
  trace_ = ac::OpTrace();
  trace_.checksums = true;
  trace_.max_abs = true;
  recorder_ = std::make_unique<ac::TraceRecorder>(trace_);
}

void NumericsTracer::add_ops(const std::vector<ac::OpRecord>& ops) {
  trace_.ops.insert(trace_.ops.end(), ops.begin(), ops.end());
}

void NumericsTracer::stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) {
  if (hook_ && stage == ForwardStage::kBlock) hook_->on_block_output(record_.step, layer, output);
  if (!tracing_) return;
  std::string name = stage_name(stage);
  if (stage == ForwardStage::kBlock) name += "." + std::to_string(layer);
  if (stage == ForwardStage::kEmbedding) ++micro_;
  if (recorder_) {
    recorder_.reset();
    add_op_entries(name);
  }
  NumericsEntry e;
  e.kind = NumericsKind::kForward;
  e.micro_batch = micro_;
  e.name = std::move(name);
  e.stats = tensor_stats(output);
  record_.forward.push_back(std::move(e));
}

void NumericsTracer::add_op_entries(const std::string& block) {
  for (size_t i = 0; i < trace_.ops.size(); ++i) {
    const ac::OpRecord& op = trace_.ops[i];
    if (!op.top_level) continue;  // reflected in its caller's output
    NumericsEntry e;
    e.kind = NumericsKind::kOp;
    e.micro_batch = micro_;
    e.name = block;
    e.position = static_cast<int64_t>(i);
    e.op = op.name;
    for (const auto& m : op.outputs) e.outputs.push_back(op_output(m));
    record_.forward.push_back(std::move(e));
  }
}

void NumericsTracer::record_gradients() {
  if (!tracing_) return;
  auto record = [this](const std::string& name, const at::Tensor& grad) {
    NumericsEntry e;
    e.kind = NumericsKind::kGradient;
    e.name = name;
    e.stats = tensor_stats(grad);
    record_.gradients.push_back(std::move(e));
  };
  if (gradient_source_) {
    gradient_source_(record);
    return;
  }
  for (const auto& [name, param] : params_) {
    const at::Tensor& grad = param.grad();
    record(name, grad.defined() ? grad : at::zeros_like(param));
  }
}

std::optional<NumericsStep> NumericsTracer::end_step() {
  if (!tracing_) return std::nullopt;
  tracing_ = false;
  if (logging_) file_->write(format_numerics_step(record_, level_ == NumericsTrace::kOps));
  return std::move(record_);
}

std::shared_ptr<NumericsTracer> make_numerics_tracer(const DebugConfig& debug, Model& model,
                                                     const std::string& log_path) {
  if (debug.numerics_trace == NumericsTrace::kNone && !rerun_armed(debug)) return nullptr;
  auto tracer = std::make_shared<NumericsTracer>(
      debug.numerics_trace, debug.numerics_freq, log_path,
      std::set<int64_t>(debug.rerun_steps.begin(), debug.rerun_steps.end()));
  tracer->attach(model);
  model->set_forward_observer(tracer);
  return tracer;
}

void remove_stale_numerics_log(const DebugConfig& debug, const std::string& log_path) {
  if (debug.numerics_trace != NumericsTrace::kNone) return;
  std::error_code ec;
  std::filesystem::remove(log_path, ec);
}

}  // namespace titan

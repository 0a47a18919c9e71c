#include "ac/op_trace.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "util/hash.h"

namespace titan::ac {
namespace {

thread_local OpTrace* tls_trace = nullptr;
// Indices into tls_trace->ops of the ops that started and have not ended yet (innermost last).
thread_local std::vector<size_t> tls_open_ops;
// Whether the thread's callback (the outermost recorder's) asked for op inputs.
thread_local bool tls_callback_inputs = false;

// A stable copy of an op name. Names of schema ops live as long as the op registry, but a
// RecordFunction started with a plain string (e.g. "titan::causal_attention") owns its name and
// frees it when the op ends. Lookup by string_view: no allocation once a name is known.
const char* intern(const char* name) {
  static std::mutex mutex;
  static std::unordered_map<std::string_view, std::unique_ptr<std::string>> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = names.find(std::string_view(name));
  if (it != names.end()) return it->second->c_str();
  auto owned = std::make_unique<std::string>(name);
  const char* stable = owned->c_str();
  names.emplace(std::string_view(*owned), std::move(owned));
  return stable;
}

// Ops whose outputs are uninitialized memory: their bytes legitimately differ between runs.
bool returns_uninitialized(const char* name) {
  for (const char* prefix :
       {"aten::empty", "aten::new_empty", "aten::resize", "aten::_resize", "aten::set_"}) {
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

int64_t id_of(OpTrace& trace, const at::Tensor& t) {
  auto it = trace.ids.find(t.unsafeGetTensorImpl());
  return it == trace.ids.end() ? -1 : it->second;
}

// In-place ops (ATen's trailing underscore) write new values into an input.
bool is_in_place(const char* name) {
  size_t n = std::strlen(name);
  return n > 0 && name[n - 1] == '_';
}

// What the end callback needs to know about an op's tensor inputs (inputs are only readable in
// the start callback).
struct InputInfo : public at::ObserverContext {
  std::vector<int64_t> ids;                       // debug mode
  std::vector<const c10::StorageImpl*> storages;  // checksum mode
};

void keep_inputs(const at::RecordFunction& fn, OpRecord& record) {
  at::DisableRecordFunctionGuard no_recording;  // the copies are not the block's ops
  record.schema = fn.operator_name();
  const bool in_place = is_in_place(record.name);
  for (const auto& input : fn.inputs()) {
    if (input.isTensor() && input.toTensor().defined()) {
      const auto t = input.toTensor().detach();
      record.inputs.emplace_back(in_place ? t.clone() : t);
    } else {
      record.inputs.push_back(input);
    }
  }
}

// Ops are recorded in the order they start (an op before the ops it calls), so the first
// difference names the outermost op that differs, e.g. aten::narrow rather than the
// aten::as_strided it calls. Outputs are filled in when the op ends.
std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  OpTrace* trace = tls_trace;
  if (!trace) return nullptr;
  const bool top_level = tls_open_ops.empty();
  tls_open_ops.push_back(trace->ops.size());
  trace->ops.emplace_back();
  trace->ops.back().name = intern(fn.name());
  trace->ops.back().top_level = top_level;
  if (trace->keep_values && top_level) keep_inputs(fn, trace->ops.back());
  if (!(trace->capture_inputs || trace->checksums || trace->keep_values)) return nullptr;
  auto ctx = std::make_unique<InputInfo>();
  for (const auto& input : fn.inputs()) {
    if (!input.isTensor() || !input.toTensor().defined()) continue;
    const auto& t = input.toTensor();
    if (trace->capture_inputs) ctx->ids.push_back(id_of(*trace, t));
    if ((trace->checksums || trace->keep_values) && t.has_storage())
      ctx->storages.push_back(t.storage().unsafeGetStorageImpl());
  }
  return ctx;
}

// Whether an output's bytes are values this op computed: not uninitialized memory (empty*),
// and not one of its inputs handed back unchanged (views, no-op to/contiguous/resolve_conj,
// which may even be an output buffer not yet written). In-place ops do compute their input.
// Checksums also need the bytes in order (`contiguous`); kept values do not (SDPA's output is a
// transposed layout).
bool holds_computed_values(const OpRecord& record, const at::Tensor& t, const InputInfo* inputs,
                           bool contiguous = true) {
  if (!record.top_level || (contiguous && !t.is_contiguous()) || returns_uninitialized(record.name))
    return false;
  if (is_in_place(record.name) || !inputs || !t.has_storage()) return true;
  const auto* storage = t.storage().unsafeGetStorageImpl();
  return std::find(inputs->storages.begin(), inputs->storages.end(), storage) ==
         inputs->storages.end();
}

void add_output(OpTrace& trace, OpRecord& record, const at::Tensor& t, const InputInfo* inputs) {
  if (!t.defined()) return;
  OutputMeta meta;
  meta.dtype = t.scalar_type();
  meta.device = t.device();
  meta.sizes.assign(t.sizes().begin(), t.sizes().end());
  if (trace.checksums && holds_computed_values(record, t, inputs)) {
    meta.hashed = true;
    meta.checksum = tensor_checksum(t);
    if (trace.max_abs && t.is_floating_point() && t.numel() > 0) {
      at::DisableRecordFunctionGuard no_recording;
      meta.max_abs = t.detach().abs().max().item<double>();
    }
  }
  if (trace.capture_inputs) {
    meta.id = trace.next_id++;
    trace.ids[t.unsafeGetTensorImpl()] = meta.id;
  }
  record.outputs.push_back(std::move(meta));
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  OpTrace* trace = tls_trace;
  if (!trace || tls_open_ops.empty()) return;
  tls_trace = nullptr;  // the checksum's own ops must not be recorded
  OpRecord& record = trace->ops[tls_open_ops.back()];
  tls_open_ops.pop_back();
  auto* inputs = static_cast<InputInfo*>(ctx);
  for (const auto& output : fn.outputs()) {
    if (output.isTensor()) {
      add_output(*trace, record, output.toTensor(), inputs);
    } else if (output.isTensorList()) {
      for (const auto& t : output.toTensorList()) add_output(*trace, record, t, inputs);
    }
  }
  if (inputs) record.input_ids = std::move(inputs->ids);
  if (trace->keep_values && !fn.outputs().empty() && fn.outputs()[0].isTensor()) {
    const auto& out = fn.outputs()[0].toTensor();
    if (out.defined() && holds_computed_values(record, out, inputs, false))
      record.value = out.detach();
  }
  tls_trace = trace;
}

}  // namespace

std::string dtype_abbreviation(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "f32";
    case at::kDouble:
      return "f64";
    case at::kHalf:
      return "f16";
    case at::kBFloat16:
      return "bf16";
    case at::kLong:
      return "i64";
    case at::kInt:
      return "i32";
    case at::kShort:
      return "i16";
    case at::kChar:
      return "i8";
    case at::kByte:
      return "u8";
    case at::kBool:
      return "b8";
    case at::kComplexFloat:
      return "c64";
    default:
      return c10::toString(t);
  }
}

std::string describe_meta(const OutputMeta& m) {
  std::string sizes;
  for (size_t i = 0; i < m.sizes.size(); ++i) sizes += (i ? ", " : "") + std::to_string(m.sizes[i]);
  std::string device = m.device.is_cpu() ? "" : " @" + m.device.str();
  return fmt::format("{}[{}]{}", dtype_abbreviation(m.dtype), sizes, device);
}

std::string OpTrace::format_line(size_t index) const {
  const OpRecord& op = ops.at(index);
  std::string lhs;
  for (const auto& out : op.outputs) {
    if (!lhs.empty()) lhs += ", ";
    lhs += out.id >= 0 ? fmt::format("${}: {}", out.id, describe_meta(out)) : describe_meta(out);
    if (out.hashed) lhs += fmt::format(" #{:016x}", out.checksum);
  }
  std::string args;
  for (size_t i = 0; i < op.input_ids.size(); ++i) {
    args += (i ? ", " : "") +
            (op.input_ids[i] >= 0 ? "$" + std::to_string(op.input_ids[i]) : std::string("?"));
  }
  return fmt::format("{}: {} = {}({})", index, lhs.empty() ? "()" : lhs, op.name, args);
}

TraceRecorder::TraceRecorder(OpTrace& trace)
    : previous_(tls_trace), previous_open_ops_(std::move(tls_open_ops)) {
  tls_open_ops.clear();
  const bool inputs = trace.capture_inputs || trace.checksums || trace.keep_values;
  if (previous_) {  // a second callback would record every op twice
    if (inputs && !tls_callback_inputs) {
      throw std::logic_error("TraceRecorder: an inner recorder needs inputs the outer one lacks");
    }
  } else {
    auto callback = at::RecordFunctionCallback(on_op_start, on_op_end)
                        .needsInputs(inputs)
                        .needsOutputs(true)
                        .scopes({at::RecordScope::FUNCTION});
    handle_ = at::addThreadLocalCallback(callback);
    owns_callback_ = true;
    tls_callback_inputs = inputs;
  }
  tls_trace = &trace;
}

TraceRecorder::~TraceRecorder() {
  tls_trace = previous_;
  tls_open_ops = std::move(previous_open_ops_);
  if (owns_callback_) at::removeCallback(handle_);
}

void TraceRecorder::name_tensor(OpTrace& trace, const at::Tensor& t) {
  if (!trace.capture_inputs) return;
  trace.ids[t.unsafeGetTensorImpl()] = trace.next_id++;
}

}  // namespace titan::ac

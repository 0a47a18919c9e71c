#include "metrics/numerics_log.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <cmath>

#include "util/files.h"
#include "util/hash.h"
#include "util/strings.h"

namespace titan {
namespace {

std::string format_stats(const TensorStats& s) {
  return fmt::format("checksum {:016x} mean {} max_abs {}", s.checksum, hex_float(s.mean),
                     hex_float(s.max_abs));
}

std::string format_op_line(const NumericsEntry& e) {
  std::string line = fmt::format("op {} {} {}", e.name, e.position, e.op);
  for (const auto& o : e.outputs) {
    line += " " + format_op_output_meta(o);
    if (o.hashed) {
      line += fmt::format(":{:016x}:{}", o.checksum, o.max_abs ? hex_float(*o.max_abs) : "-");
    }
  }
  return line;
}

}  // namespace

TensorStats tensor_stats(const at::Tensor& t) {
  at::DisableRecordFunctionGuard no_recording;
  TensorStats s;
  s.checksum = tensors_checksum({t});
  at::Tensor f = t.detach().to(at::kCPU).to(at::kFloat).contiguous();
  const float* p = f.data_ptr<float>();
  const int64_t n = f.numel();
  double sum = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += p[i];
    const double a = std::fabs(static_cast<double>(p[i]));
    if (!(a <= max_abs)) max_abs = a;  // NaN sticks
  }
  s.mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  s.max_abs = max_abs;
  return s;
}

std::string numerics_header(const std::string& level, int64_t freq) {
  return fmt::format("{}: diff two of these to find where runs part\nlevel {}\nfreq {}\n",
                     kNumericsMagic, level, freq);
}

std::string format_op_output_meta(const OpOutput& o) {
  return fmt::format("{}[{}]{}", o.dtype, fmt::join(o.sizes, ","),
                     o.device.empty() ? "" : "@" + o.device);
}

std::string format_numerics_step(const NumericsStep& step, bool with_ops) {
  std::string out;
  int64_t micro = -1;
  for (const auto& e : step.forward) {
    if (e.micro_batch != micro) {
      micro = e.micro_batch;
      out += fmt::format("step {} micro {}\n", step.step, micro);
    }
    if (e.kind == NumericsKind::kOp) {
      if (with_ops) out += format_op_line(e) + "\n";
    } else {
      out += fmt::format("fwd {} {}\n", e.name, format_stats(e.stats));
    }
  }
  if (!step.gradients.empty()) out += fmt::format("step {} grads\n", step.step);
  for (const auto& e : step.gradients) {
    out += fmt::format("grad {} {}\n", e.name, format_stats(e.stats));
  }
  return out + fmt::format("end step {}\n", step.step);
}

int64_t numerics_line_step(const std::string& line) {
  const int64_t step = step_after_prefix(line, "step ");
  return step >= 0 ? step : step_after_prefix(line, "end step ");
}

std::string describe_entry(const NumericsEntry& e) {
  std::string micro = e.micro_batch > 0 ? fmt::format(" (micro-batch {})", e.micro_batch) : "";
  switch (e.kind) {
    case NumericsKind::kForward:
      return fmt::format("fwd {}{}", e.name, micro);
    case NumericsKind::kOp:
      return fmt::format("op {} #{} {}{}", e.name, e.position, e.op, micro);
    case NumericsKind::kGradient:
      break;
  }
  return fmt::format("grad {}", e.name);
}

}  // namespace titan

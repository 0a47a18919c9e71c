#include "instruments/precision_report.h"

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/strings.h"

namespace titan {
namespace {

at::Tensor as_float64(const at::Tensor& t) {
  auto v = t.detach();
  if (v.is_complex()) v = at::view_as_real(v.is_conj() ? v.resolve_conj() : v);
  return v.to(at::kDouble);
}

std::string json_error(const RelativeError& e) {
  return fmt::format("\"rel_error\": {}, \"rms_rel_error\": {}", json_float(e.max_rel),
                     json_float(e.rms_rel));
}

std::string json_scalar(const ScalarPrecision& s) {
  return fmt::format("\"run\": {}, \"reference\": {}, \"rel_error\": {}", json_float(s.run),
                     json_float(s.reference), json_float(s.rel_error));
}

// Op indices, largest added error first.
std::vector<size_t> ops_by_added_error(const PrecisionReport& r) {
  std::vector<size_t> order(r.ops.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return r.ops[a].added.max_rel > r.ops[b].added.max_rel;
  });
  return order;
}

std::string op_label(const OpPrecision& op, bool micro_batches) {
  return micro_batches
             ? fmt::format("mb {} layers.{} #{} {}", op.micro_batch, op.block, op.index, op.name)
             : fmt::format("layers.{} #{} {}", op.block, op.index, op.name);
}

bool has_micro_batches(const PrecisionReport& r) {
  return std::any_of(r.ops.begin(), r.ops.end(), [](const auto& op) { return op.micro_batch > 0; });
}

std::string op_table(const PrecisionReport& r, size_t rows) {
  const bool mb = has_micro_batches(r);
  std::string out = fmt::format("  {:<44} {:<5} {:<18} {:>10} {:>10} {:>10}\n", "op", "dtype",
                                "shape", "added", "added rms", "error");
  const auto order = ops_by_added_error(r);
  for (size_t i = 0; i < std::min(rows, order.size()); ++i) {
    const OpPrecision& op = r.ops[order[i]];
    out += fmt::format("  {:<44} {:<5} {:<18} {:>10.3e} {:>10.3e} {:>10.3e}\n", op_label(op, mb),
                       op.dtype, op.shape, op.added.max_rel, op.added.rms_rel, op.error.max_rel);
  }
  return out;
}

std::string scalar_lines(const PrecisionReport& r) {
  std::string out = fmt::format("  loss       run {:.10g}  {} {:.10g}  rel_error {:.3e}\n",
                                r.loss.run, r.reference, r.loss.reference, r.loss.rel_error);
  out += fmt::format("  grad_norm  run {:.10g}  {} {:.10g}  rel_error {:.3e}\n", r.grad_norm.run,
                     r.reference, r.grad_norm.reference, r.grad_norm.rel_error);
  const double sum_error = r.grad_norm_exact_sum != 0
                               ? (r.grad_norm.run - r.grad_norm_exact_sum) / r.grad_norm_exact_sum
                               : 0.0;
  out += fmt::format(
      "  grad_norm  the run's gradients summed exactly: {:.10g}: the {} sum of squares is off by "
      "{:.3e} relative",
      r.grad_norm_exact_sum, r.grad_norm_accumulate, sum_error);
  auto biggest =
      std::max_element(r.gradients.begin(), r.gradients.end(), [](const auto& a, const auto& b) {
        return std::abs(a.norm_error_share) < std::abs(b.norm_error_share);
      });
  if (biggest != r.gradients.end() && sum_error != 0) {
    out += fmt::format(", {:.0f}% of it from {}", 100 * biggest->norm_error_share, biggest->name);
  }
  return out + "\n";
}

}  // namespace

RelativeError relative_error(const at::Tensor& value, const at::Tensor& reference) {
  at::NoGradGuard no_grad;
  const auto ref = as_float64(reference);
  const auto diff = as_float64(value) - ref;
  RelativeError e;
  if (ref.numel() == 0) return e;
  const double ref_max = ref.abs().max().item<double>();
  const double ref_norm = ref.norm().item<double>();
  const double diff_max = diff.abs().max().item<double>();
  const double diff_norm = diff.norm().item<double>();
  e.max_rel = ref_max > 0 ? diff_max / ref_max : diff_max;
  e.rms_rel = ref_norm > 0 ? diff_norm / ref_norm : diff_norm;
  return e;
}

void find_worst_op(PrecisionReport& report) {
  report.worst_op.reset();
  if (!report.ops.empty()) report.worst_op = ops_by_added_error(report).front();
}

std::string format_precision_summary(const PrecisionReport& r) {
  std::string out = fmt::format(
      "[titan] precision step {}: {} against a {} execution; the ten ops adding the most error "
      "(re-execution bitwise the run's: {}):\n",
      r.step, r.dtype, r.reference, r.reexecution_bitwise ? "yes" : "no");
  out += op_table(r, 10);
  return out + scalar_lines(r);
}

std::string format_precision_text(const PrecisionReport& r) {
  std::string out = fmt::format("precision step {}: the run in {} against {}, {:.2f} s\n", r.step,
                                r.dtype, r.reference, r.seconds);
  out += fmt::format(
      "The step executed again in {} from the kept state gave the run's loss and grad_norm bit "
      "for bit: {}\n",
      r.dtype, r.reexecution_bitwise ? "yes" : "no");
  if (r.worst_op) {
    const OpPrecision& w = r.ops[*r.worst_op];
    out += fmt::format("worst op: {} adds {:.3e} (max relative; rms {:.3e})\n",
                       op_label(w, has_micro_batches(r)), w.added.max_rel, w.added.rms_rel);
  }
  out += "\n" + scalar_lines(r);
  out +=
      "\nops, largest added error first (added: the op alone on the reference's inputs; "
      "error: the run's output):\n";
  out += op_table(r, r.ops.size());
  out += "\nblock outputs (micro-batch 0):\n";
  for (size_t b = 0; b < r.blocks.size(); ++b) {
    out += fmt::format("  layers.{:<3} rel_error {:.3e}  rms {:.3e}\n", b, r.blocks[b].max_rel,
                       r.blocks[b].rms_rel);
  }
  out += fmt::format("  logits     rel_error {:.3e}  rms {:.3e}\n", r.logits.max_rel,
                     r.logits.rms_rel);
  out += "\ngradients (before clipping):\n";
  for (const auto& g : r.gradients) {
    out += fmt::format("  {:<40} rel_error {:.3e}  rms {:.3e}  norm in {} {:+.3e}\n", g.name,
                       g.error.max_rel, g.error.rms_rel, r.grad_norm_accumulate, g.norm_rel_error);
  }
  return out;
}

std::string format_precision_json(const PrecisionReport& r) {
  std::string out = fmt::format(
      "{{\"step\": {}, \"dtype\": \"{}\", \"reference\": \"{}\", \"reexecution_bitwise\": {}, "
      "\"seconds\": {},\n",
      r.step, r.dtype, r.reference, r.reexecution_bitwise ? "true" : "false",
      json_float(r.seconds));
  out += fmt::format("\"loss\": {{{}}},\n", json_scalar(r.loss));
  out += fmt::format(
      "\"grad_norm\": {{{}, \"accumulate\": \"{}\", \"run_gradients_exact\": {}}},\n",
      json_scalar(r.grad_norm), r.grad_norm_accumulate, json_float(r.grad_norm_exact_sum));
  auto op_json = [](const OpPrecision& op) {
    return fmt::format(
        "{{\"micro_batch\": {}, \"block\": {}, \"index\": {}, \"name\": \"{}\", \"dtype\": "
        "\"{}\", \"shape\": \"{}\", {}, \"added_rel_error\": {}, \"added_rms_rel_error\": {}}}",
        op.micro_batch, op.block, op.index, op.name, op.dtype, op.shape, json_error(op.error),
        json_float(op.added.max_rel), json_float(op.added.rms_rel));
  };
  out += "\"ops\": [";
  for (size_t i = 0; i < r.ops.size(); ++i) out += (i ? ",\n  " : "\n  ") + op_json(r.ops[i]);
  out += "],\n\"worst_op\": " + (r.worst_op ? op_json(r.ops[*r.worst_op]) : "null") + ",\n";
  out += "\"blocks\": [";
  for (size_t b = 0; b < r.blocks.size(); ++b)
    out += fmt::format("{}{{\"block\": {}, {}}}", b ? ", " : "", b, json_error(r.blocks[b]));
  out += fmt::format("],\n\"logits\": {{{}}},\n\"gradients\": [", json_error(r.logits));
  for (size_t i = 0; i < r.gradients.size(); ++i) {
    const auto& g = r.gradients[i];
    out +=
        fmt::format("{}{{\"name\": \"{}\", {}, \"norm_rel_error\": {}, \"norm_error_share\": {}}}",
                    i ? ",\n  " : "\n  ", g.name, json_error(g.error), json_float(g.norm_rel_error),
                    json_float(g.norm_error_share));
  }
  return out + "]}\n";
}

}  // namespace titan

#include "instruments/rerun.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "util/hash.h"

namespace titan {
namespace {

// "tok_embeddings", "layers.3", "norm", "output" for a tensor or parameter name.
std::string part_of(const std::string& name) {
  size_t dot = name.find('.');
  if (name.compare(0, 7, "layers.") == 0) dot = name.find('.', 7);
  return dot == std::string::npos ? name : name.substr(0, dot);
}

bool entry_non_finite(const NumericsEntry& e) {
  if (e.kind != NumericsKind::kOp)
    return !std::isfinite(e.stats.max_abs) || !std::isfinite(e.stats.mean);
  for (const auto& o : e.outputs) {
    if (o.max_abs && !std::isfinite(*o.max_abs)) return true;
  }
  return false;
}

std::optional<NumericsEntry> first_non_finite(const NumericsStep& step) {
  for (const auto& e : step.forward) {
    if (entry_non_finite(e)) return e;
  }
  for (const auto& e : step.gradients) {
    if (entry_non_finite(e)) return e;
  }
  return std::nullopt;
}

// NaN sorts above everything, so the worst value wins.
double worse(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return std::max(a, b);
}

std::vector<BlockExtremes> extremes_by_part(const NumericsStep& step) {
  std::vector<BlockExtremes> parts;
  std::map<std::string, size_t> index;
  auto part = [&](const std::string& name) -> BlockExtremes& {
    auto it = index.find(name);
    if (it != index.end()) return parts[it->second];
    index[name] = parts.size();
    BlockExtremes added;
    added.name = name;
    parts.push_back(added);
    return parts.back();
  };
  for (const auto& e : step.forward) {
    BlockExtremes& p = part(e.name);
    if (e.kind == NumericsKind::kForward) {
      p.activation = worse(p.activation, e.stats.max_abs);
      continue;
    }
    for (const auto& o : e.outputs) {
      if (!o.max_abs) continue;
      const double v = *o.max_abs;
      if (std::isnan(p.top_op_value)) continue;  // the first NaN stays
      if (p.top_op.empty() || std::isnan(v) || v > p.top_op_value) {
        p.top_op_value = v;
        p.top_op = fmt::format("#{} {}", e.position, e.op);
      }
    }
  }
  for (const auto& e : step.gradients) {
    BlockExtremes& p = part(part_of(e.name));
    p.gradient = worse(p.gradient, e.stats.max_abs);
  }
  return parts;
}

std::string describe_difference(const NumericsDifference& d, const std::string& label_a,
                                const std::string& label_b) {
  auto side = [](const std::optional<NumericsEntry>& e) -> std::string {
    if (!e) return "(absent)";
    if (e->kind != NumericsKind::kOp) return fmt::format("checksum {:016x}", e->stats.checksum);
    std::string out;
    for (const auto& o : e->outputs) {
      out += fmt::format("{}{}", out.empty() ? "" : ", ", format_op_output_meta(o));
      if (o.hashed) {
        out += fmt::format(" checksum {:016x} max_abs {}", o.checksum,
                           o.max_abs ? fmt::format("{:a}", *o.max_abs) : "-");
      }
    }
    return out;
  };
  const auto& named = d.a ? *d.a : *d.b;
  return fmt::format("{}\n    {}: {}\n    {}: {}", describe_entry(named), label_a, side(d.a),
                     label_b, side(d.b));
}

void write_executions(std::string& out, const RerunReport& r) {
  out += "executions (loss, grad_norm, checksum of all gradients before the update):\n";
  for (const auto& e : r.executions) {
    out += fmt::format("  {:<34} loss {:a}  grad_norm {:a}  gradients {:016x}{}\n", e.label, e.loss,
                       e.grad_norm, e.gradients, e.trace ? "  (traced)" : "");
  }
}

void write_sequences(std::string& out, const RerunReport& r, const std::string& indent) {
  out += indent + "batch provenance and loss per sequence (before the step):\n";
  for (const auto& s : r.sequences) {
    std::string spans;
    for (const auto& d : s.sources) {
      spans += fmt::format("{}document {} tokens [{}, {})", spans.empty() ? "" : "; ", d.document,
                           d.offset, d.offset + d.tokens);
    }
    out += fmt::format("{}  micro-batch {} sequence {}: loss {:.6g}  {}\n", indent, s.micro_batch,
                       s.sequence, s.loss, spans);
  }
}

void write_extremes(std::string& out, const RerunReport& r) {
  out += "largest |value| by block (activations: the output; op: the largest op output inside):\n";
  for (const auto& p : r.extremes) {
    out += fmt::format(
        "  {:<16} activation {:<12.6g} gradient {:<12.6g}{}\n", p.name, p.activation, p.gradient,
        p.top_op.empty() ? "" : fmt::format(" op {} {:.6g}", p.top_op, p.top_op_value));
  }
}

}  // namespace

const char* to_string(RerunTrigger trigger) {
  switch (trigger) {
    case RerunTrigger::kNonFinite:
      return "nan";
    case RerunTrigger::kSpike:
      return "spike";
    case RerunTrigger::kRequested:
      break;
  }
  return "requested";
}

const char* to_string(RerunOutcome outcome) {
  switch (outcome) {
    case RerunOutcome::kReproducible:
      return "reproducible";
    case RerunOutcome::kNotReproducible:
      break;
  }
  return "not reproducible";
}

RerunMonitor::RerunMonitor(const DebugConfig& debug) : debug_(debug) {}

bool rerun_armed(const DebugConfig& debug) {
  return debug.rerun_on != RerunOn::kNone || !debug.rerun_steps.empty();
}

bool RerunMonitor::armed() const { return rerun_armed(debug_); }

bool RerunMonitor::requested(int64_t step) const {
  const auto& s = debug_.rerun_steps;
  return std::find(s.begin(), s.end(), step) != s.end();
}

bool RerunMonitor::keeps_state_before(int64_t step) const {
  switch (debug_.rerun_on) {
    case RerunOn::kNan:
    case RerunOn::kBoth:
      return true;
    case RerunOn::kSpike:
      return window_full() || requested(step);  // no spike before the window has filled
    case RerunOn::kNone:
      break;
  }
  return requested(step);
}

std::optional<RerunTrigger> RerunMonitor::trigger(int64_t step, double loss,
                                                  double grad_norm) const {
  const bool nan = debug_.rerun_on == RerunOn::kNan || debug_.rerun_on == RerunOn::kBoth;
  const bool spike = debug_.rerun_on == RerunOn::kSpike || debug_.rerun_on == RerunOn::kBoth;
  if (nan && (!std::isfinite(loss) || !std::isfinite(grad_norm))) return RerunTrigger::kNonFinite;
  if (spike && window_full() && loss > debug_.rerun_spike_factor * window_mean()) {
    return RerunTrigger::kSpike;
  }
  if (requested(step)) return RerunTrigger::kRequested;
  return std::nullopt;
}

std::string RerunMonitor::describe(RerunTrigger trigger, double loss, double grad_norm) const {
  switch (trigger) {
    case RerunTrigger::kNonFinite:
      return fmt::format("loss {}, grad_norm {} (debug.rerun_on = \"{}\")", loss, grad_norm,
                         titan::to_string(debug_.rerun_on));
    case RerunTrigger::kSpike:
      return fmt::format("loss {:.6g} > {} x {:.6g}, the mean of the last {} losses", loss,
                         debug_.rerun_spike_factor, window_mean(), debug_.rerun_window);
    case RerunTrigger::kRequested:
      break;
  }
  return "listed in debug.rerun_steps";
}

void RerunMonitor::accept(double loss) {
  if (!std::isfinite(loss)) return;
  window_.push_back(loss);
  window_sum_ += loss;
  while (static_cast<int64_t>(window_.size()) > debug_.rerun_window) {
    window_sum_ -= window_.front();
    window_.pop_front();
  }
}

bool RerunMonitor::window_full() const {
  return static_cast<int64_t>(window_.size()) >= debug_.rerun_window;
}

double RerunMonitor::window_mean() const {
  // Summed afresh: a running sum drifts, and the window is small.
  double sum = 0;
  for (double l : window_) sum += l;
  return window_.empty() ? 0 : sum / static_cast<double>(window_.size());
}

bool same_result(const StepExecution& a, const StepExecution& b) {
  return same_bits(a.loss, b.loss) && same_bits(a.grad_norm, b.grad_norm) &&
         a.gradients == b.gradients;
}

void analyse_rerun(RerunReport& r) {
  const auto& executions = r.executions;
  bool same = true;
  for (size_t i = 1; i < executions.size(); ++i)
    same = same && same_result(executions[0], executions[i]);
  // The traced executions, original first when it was traced.
  std::vector<const StepExecution*> traced;
  for (const auto& e : executions) {
    if (e.trace) traced.push_back(&e);
  }
  std::optional<NumericsDifference> difference;
  for (size_t i = 1; i < traced.size() && !difference; ++i) {
    NumericsLogFile a{"", "ops", 1, {*traced[0]->trace}}, b{"", "ops", 1, {*traced[i]->trace}};
    NumericsComparison c = compare_numerics(a, b);
    difference = c.op ? c.op : c.forward ? c.forward : c.gradient;
    if (difference) r.difference_between = {traced[0]->label, traced[i]->label};
  }
  r.outcome = same && !difference ? RerunOutcome::kReproducible : RerunOutcome::kNotReproducible;
  r.first_difference = difference;
  if (r.outcome == RerunOutcome::kNotReproducible && !difference) {
    r.difference_note =
        "the traced re-executions agree with each other but not with the original, which was "
        "not traced (a one-time fault); to name the op, trace the original: list the step in "
        "debug.rerun_steps or set debug.numerics_trace = \"ops\"";
  }
  if (!traced.empty()) {
    r.first_non_finite = first_non_finite(*traced[0]->trace);
    r.extremes = extremes_by_part(*traced[0]->trace);
  }
}

std::string format_rerun_report(const RerunReport& r) {
  std::string out = fmt::format("# titan-train rerun report: step {}\n", r.step);
  out += fmt::format("trigger: {}: {}\n", to_string(r.trigger), r.trigger_text);
  const bool reproducible = r.outcome == RerunOutcome::kReproducible;
  out += fmt::format("outcome: {}\n", to_string(r.outcome));
  if (reproducible) {
    out += "cause: the data or the model state (the step computes the same bits again)\n";
  } else {
    out += fmt::format(
        "cause: nondeterminism or a transient machine fault; debug.deterministic was {}{}\n",
        r.deterministic ? "on" : "off",
        r.deterministic ? ", so this points at the machine"
                        : " (rerun with debug.deterministic = true to rule out nondeterminism)");
  }
  write_executions(out, r);
  if (r.first_difference) {
    out += fmt::format("first difference (step {}): {}\n", r.step,
                       describe_difference(*r.first_difference, r.difference_between.first,
                                           r.difference_between.second));
  } else if (!r.difference_note.empty()) {
    out += "first difference: " + r.difference_note + "\n";
  }
  if (r.trigger == RerunTrigger::kNonFinite || r.first_non_finite) {
    out += r.first_non_finite ? fmt::format("first non-finite output (forward order): {}\n",
                                            describe_entry(*r.first_non_finite))
                              : "first non-finite output: none traced (the loss alone)\n";
  }
  out += fmt::format("data: {}\n", r.dataset);
  write_sequences(out, r, "");
  write_extremes(out, r);
  out += format_layer_window(r.layer_window);
  if (!r.action.empty()) out += fmt::format("action: {}\n", r.action);
  return out;
}

}  // namespace titan

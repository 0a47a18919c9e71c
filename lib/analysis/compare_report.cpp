// The two renderings of a Comparison: text for people, one JSON object for scripts.
#include <fmt/format.h>

#include <cmath>

#include "analysis/compare.h"
#include "util/strings.h"

namespace titan {
namespace {

std::string files_of(const RunFiles& r) {
  std::string s = r.fingerprint;
  if (r.config) s += ", " + *r.config;
  if (r.numerics) s += ", " + *r.numerics;
  return s;
}

std::string sci(double v) { return fmt::format("{:.3g}", v); }

std::string describe_stats(const NumericsEntry& e) {
  if (e.kind != NumericsKind::kOp) {
    return fmt::format("checksum {:016x}  mean {:.9g}  max_abs {:.9g}", e.stats.checksum,
                       e.stats.mean, e.stats.max_abs);
  }
  std::string s;
  for (const auto& o : e.outputs) {
    if (!s.empty()) s += "; ";
    s += format_op_output_meta(o);
    if (o.hashed) {
      const std::string max_abs = o.max_abs ? fmt::format("{:.9g}", *o.max_abs) : "-";
      s += fmt::format(" checksum {:016x}  max_abs {}", o.checksum, max_abs);
    }
  }
  return s.empty() ? "(no outputs)" : s;
}

void append_numerics_difference(std::string& out, const char* what,
                                const std::optional<NumericsDifference>& d) {
  if (!d) return;
  const auto& any = d->a ? *d->a : *d->b;
  out += fmt::format("  {}: {}\n", what, describe_entry(any));
  out +=
      fmt::format("    A: {}\n", d->a ? describe_entry(*d->a) == describe_entry(any)
                                            ? describe_stats(*d->a)
                                            : describe_entry(*d->a) + "  " + describe_stats(*d->a)
                                      : std::string("(no such entry)"));
  out +=
      fmt::format("    B: {}\n", d->b ? describe_entry(*d->b) == describe_entry(any)
                                            ? describe_stats(*d->b)
                                            : describe_entry(*d->b) + "  " + describe_stats(*d->b)
                                      : std::string("(no such entry)"));
}

void append_field(std::string& out, const FieldDifference& d) {
  out += fmt::format("  A: {}\n  B: {}\n", d.a_text, d.b_text);
  if (d.numeric)
    out += fmt::format("  abs diff {}  rel diff {}\n", sci(d.abs_diff), sci(d.rel_diff));
}

void append_result(std::string& out, const Comparison& c) {
  if (c.identical) {
    out += fmt::format(
        "result: bitwise identical: every field of the {} common steps is bitwise equal\n",
        c.common_steps);
    return;
  }
  const auto& first = *c.first_difference;
  if (c.tolerance && !c.first_beyond_tolerance) {
    out += fmt::format(
        "result: within tolerance {}: largest relative difference {} (first bitwise difference: "
        "step {}, {})\n",
        *c.tolerance, sci(c.max_rel_diff), first.step, first.field);
    return;
  }
  const auto& d = c.tolerance ? *c.first_beyond_tolerance : first;
  out += fmt::format("result: diverged at step {}: {}{}\n", d.step, d.field,
                     c.tolerance ? fmt::format(" (beyond tolerance {})", *c.tolerance) : "");
  append_field(out, d);
  out += fmt::format("loss difference from step {}:\n", d.step);
  out += fmt::format("  {:>6}  {:>20}  {:>20}  {:>10}  {:>10}\n", "step", "loss A", "loss B",
                     "abs diff", "rel diff");
  for (const auto& r : c.loss_growth) {
    out += fmt::format("  {:>6}  {:>20.17g}  {:>20.17g}  {:>10.3g}  {:>10.3g}\n", r.step, r.a, r.b,
                       r.abs_diff, r.rel_diff);
  }
}

void append_numerics(std::string& out, const NumericsComparison& n) {
  if (!n.compared) {
    out += fmt::format("numerics.log: not compared: {}\n", n.note);
    return;
  }
  if (!n.note.empty()) out += fmt::format("numerics.log: {}\n", n.note);
  const std::string beyond =
      n.tolerance ? fmt::format(" beyond tolerance {} (mean and max_abs; checksums not compared)",
                                *n.tolerance)
                  : "";
  if (!n.step) {
    out += fmt::format("numerics.log: no difference{} in the steps both runs traced\n", beyond);
    return;
  }
  out += fmt::format("numerics.log: first difference{} at step {}\n", beyond, *n.step);
  append_numerics_difference(out, "first tensor (forward order)", n.forward);
  append_numerics_difference(out, "first op", n.op);
  append_numerics_difference(out, "first gradient (backward order)", n.gradient);
}

// ---- JSON -----------------------------------------------------------------------------------

template <class T, class F>
std::string json_array(const std::vector<T>& items, F&& render) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + render(items[i]);
  return out + "]";
}

std::string json_field(const std::optional<FieldDifference>& d) {
  if (!d) return "null";
  std::string out =
      fmt::format(R"({{"step": {}, "field": {}, "a": {}, "b": {})", d->step, json_quoted(d->field),
                  json_quoted(d->a_text), json_quoted(d->b_text));
  if (d->numeric) {
    out += fmt::format(R"(, "a_value": {}, "b_value": {}, "abs_diff": {}, "rel_diff": {})",
                       json_double(d->a), json_double(d->b), json_double(d->abs_diff),
                       json_double(d->rel_diff));
  }
  return out + "}";
}

std::string json_entry(const std::optional<NumericsEntry>& e) {
  if (!e) return "null";
  std::string out =
      fmt::format(R"({{"entry": {}, "line": {})", json_quoted(describe_entry(*e)), e->line);
  if (e->kind == NumericsKind::kOp) {
    out += fmt::format(
        R"(, "block": {}, "position": {}, "op": {}, "outputs": {})", json_quoted(e->name),
        e->position, json_quoted(e->op), json_array(e->outputs, [](const OpOutput& o) {
          return fmt::format(R"({{"meta": {}, "checksum": {}, "max_abs": {}}})",
                             json_quoted(format_op_output_meta(o)),
                             o.hashed ? json_quoted(fmt::format("{:016x}", o.checksum)) : "null",
                             o.max_abs ? json_double(*o.max_abs) : "null");
        }));
  } else {
    out += fmt::format(R"(, "tensor": {}, "checksum": "{:016x}", "mean": {}, "max_abs": {})",
                       json_quoted(e->name), e->stats.checksum, json_double(e->stats.mean),
                       json_double(e->stats.max_abs));
  }
  return out + "}";
}

std::string json_numerics_difference(const std::optional<NumericsDifference>& d) {
  if (!d) return "null";
  return fmt::format(R"({{"a": {}, "b": {}}})", json_entry(d->a), json_entry(d->b));
}

std::string json_numerics(const NumericsComparison& n) {
  return fmt::format(
      R"({{"compared": {}, "note": {}, "step": {}, "forward": {}, "op": {}, "gradient": {}}})",
      n.compared, json_quoted(n.note), n.step ? std::to_string(*n.step) : "null",
      json_numerics_difference(n.forward), json_numerics_difference(n.op),
      json_numerics_difference(n.gradient));
}

}  // namespace

std::string format_comparison_text(const Comparison& c) {
  std::string out;
  out += fmt::format("A: {}\nB: {}\n", files_of(c.a), files_of(c.b));
  if (c.header.empty())
    out +=
        "header: same versions, device, config hash, seed, flags, threads, BLAS, attention, "
        "SwiGLU, RMSNorm and AdamW kernels\n";
  else
    out += "header differences (fingerprint.log):\n";
  for (const auto& h : c.header) {
    // Under batch invariance these only say how the same arithmetic was spread out.
    const bool spread = h.key == "cpu_threads" || h.key == "world_size" || h.key == "comm_numerics";
    out += fmt::format("  {}: A {} | B {}{}\n", h.key, h.a, h.b,
                       spread && c.both_batch_invariant
                           ? "  (both runs batch-invariant: not a cause of differences)"
                           : "");
  }
  if (!c.configs_compared) {
    out += "config.toml: not compared (needs one beside each fingerprint.log)\n";
  } else if (!c.config_keys.empty()) {
    out += "config.toml differences:\n";
    for (const auto& k : c.config_keys) {
      out += fmt::format("  {}: A {} | B {}{}\n", k.key, k.a, k.b,
                         k.hashed ? "" : "  (not in the config hash)");
    }
  }
  out += fmt::format("steps: A {}, B {}; compared 1-{}\n", c.steps_a, c.steps_b, c.common_steps);
  append_result(out, c);
  append_numerics(out, c.numerics);
  return out;
}

std::string format_comparison_json(const Comparison& c) {
  auto header = json_array(c.header, [](const HeaderDifference& h) {
    return fmt::format(R"({{"key": {}, "a": {}, "b": {}}})", json_quoted(h.key), json_quoted(h.a),
                       json_quoted(h.b));
  });
  auto keys = json_array(c.config_keys, [](const ConfigKeyDifference& k) {
    return fmt::format(R"({{"key": {}, "a": {}, "b": {}, "hashed": {}}})", json_quoted(k.key),
                       json_quoted(k.a), json_quoted(k.b), k.hashed);
  });
  auto growth = json_array(c.loss_growth, [](const LossRow& r) {
    return fmt::format(R"({{"step": {}, "a": {}, "b": {}, "abs_diff": {}, "rel_diff": {}}})",
                       r.step, json_double(r.a), json_double(r.b), json_double(r.abs_diff),
                       json_double(r.rel_diff));
  });
  std::string out = "{";
  out += fmt::format(R"("a": {}, "b": {}, )", json_quoted(c.a.arg), json_quoted(c.b.arg));
  out +=
      fmt::format(R"("header_differences": {}, "configs_compared": {}, "config_differences": {}, )",
                  header, c.configs_compared, keys);
  out += fmt::format(R"("steps_a": {}, "steps_b": {}, "common_steps": {}, )", c.steps_a, c.steps_b,
                     c.common_steps);
  out += fmt::format(R"("tolerance": {}, "identical": {}, "diverged": {}, "max_rel_diff": {}, )",
                     c.tolerance ? json_double(*c.tolerance) : "null", c.identical, c.diverged(),
                     json_double(c.max_rel_diff));
  const auto& divergent = c.tolerance ? c.first_beyond_tolerance : c.first_difference;
  out += fmt::format(R"("divergent_step": {}, )",
                     c.diverged() ? std::to_string(divergent->step) : "null");
  out += fmt::format(R"("first_difference": {}, "first_beyond_tolerance": {}, )",
                     json_field(c.first_difference), json_field(c.first_beyond_tolerance));
  out += fmt::format(R"("loss_growth": {}, "numerics": {}, "exit_code": {})", growth,
                     json_numerics(c.numerics), c.exit_code());
  return out + "}\n";
}

}  // namespace titan

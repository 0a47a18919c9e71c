#include "train/replay_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "util/strings.h"

namespace titan {
namespace {

// Keys of machine.txt that cannot change a replay's bits.
bool ignored_machine_key(const std::string& key) { return key == "tokenizer"; }

double unit_roundoff(const std::string& dtype) {
  if (dtype == "bf16") return std::ldexp(1.0, -8);
  if (dtype == "f16") return std::ldexp(1.0, -11);
  if (dtype == "f64") return std::ldexp(1.0, -53);
  return std::ldexp(1.0, -24);
}

bool same_output(const CapturedOp& a, const CapturedOp& b) { return a.checksum == b.checksum; }

// The same op of the step on both sides: its micro-batch and block, name, dtype and shape. The
// op index is left out: another libtorch version records other ops around it (a view here, a
// copy there).
bool same_kind(const CapturedOp& a, const CapturedOp& b) {
  return a.micro_batch == b.micro_batch && a.block == b.block && a.name == b.name &&
         a.dtype == b.dtype && a.shape == b.shape;
}

using OpPair = std::pair<const CapturedOp*, const CapturedOp*>;

// The two sides' ops matched in order (a longest common subsequence of same_kind ops); an op of
// one side without a match is paired with null. Blocks hold tens of ops, so the quadratic table
// is small.
std::vector<OpPair> align_ops(const std::vector<CapturedOp>& a, const std::vector<CapturedOp>& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] =
          same_kind(a[i], b[j]) ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<OpPair> out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && same_kind(a[i], b[j])) {
      out.emplace_back(&a[i++], &b[j++]);
    } else if (j == m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.emplace_back(&a[i++], nullptr);
    } else {
      out.emplace_back(nullptr, &b[j++]);
    }
  }
  return out;
}

std::string place(const CapturedOp& op) {
  return fmt::format("micro-batch {} layers.{} op #{} {} {}{}", op.micro_batch, op.block, op.index,
                     op.name, op.dtype, op.shape);
}

double rel_error(double value, double reference) {
  return reference != 0 ? std::abs(value - reference) / std::abs(reference)
                        : std::abs(value - reference);
}

std::string verdict_text(const OpComparison& op) {
  switch (op.closer) {
    case Closer::kBothWithinBound:
      return fmt::format("both within the op's bound ({} units of roundoff of {}: {:.3g})",
                         kBoundUnits, op.capture.dtype, op.bound);
    case Closer::kCapture:
      return fmt::format("the capture is closer to float64, by {:.3g}x", op.factor);
    case Closer::kReplay:
      return fmt::format("the replay is closer to float64, by {:.3g}x", op.factor);
  }
  return "";
}

const char* closer_name(Closer c) {
  switch (c) {
    case Closer::kBothWithinBound:
      return "both_within_bound";
    case Closer::kCapture:
      return "capture";
    case Closer::kReplay:
      return "replay";
  }
  return "";
}

std::string op_text(const OpComparison& op, bool first) {
  std::string out = fmt::format("  {}\n", place(op.capture));
  out += fmt::format("    output norm: capture {:.9g}, replay {:.9g} (differ by {:.3g} of it)\n",
                     op.capture.norm, op.replay.norm, op.norm_difference);
  out += fmt::format("    added error against float64 (max rel): capture {:.3g}, replay {:.3g}\n",
                     op.capture.added.max_rel, op.replay.added.max_rel);
  out += fmt::format("    verdict: {}", verdict_text(op));
  if (!first) out += op.adds ? "; adds error of its own" : "; inherits (its inputs differed)";
  return out + "\n";
}

std::string scalar_text(const char* name, const ScalarSides& s) {
  return fmt::format(
      "{}: capture {:.9g} (float64 {:.9g}, rel error {:.3g}), replay {:.9g} (float64 {:.9g}, rel "
      "error {:.3g})\n",
      name, s.capture, s.capture_reference, rel_error(s.capture, s.capture_reference), s.replay,
      s.replay_reference, rel_error(s.replay, s.replay_reference));
}

std::string op_json(const OpComparison& op) {
  return fmt::format(
      "{{\"micro_batch\": {}, \"block\": {}, \"index\": {}, \"name\": {}, \"dtype\": {}, "
      "\"shape\": {}, \"capture_norm\": {}, \"replay_norm\": {}, \"norm_difference\": {}, "
      "\"capture_added_rel_error\": {}, \"replay_added_rel_error\": {}, \"bound\": {}, "
      "\"closer\": \"{}\", \"factor\": {}, \"adds\": {}}}",
      op.capture.micro_batch, op.capture.block, op.capture.index, json_quoted(op.capture.name),
      json_quoted(op.capture.dtype), json_quoted(op.capture.shape), json_float(op.capture.norm),
      json_float(op.replay.norm), json_float(op.norm_difference),
      json_float(op.capture.added.max_rel), json_float(op.replay.added.max_rel),
      json_float(op.bound), closer_name(op.closer), json_float(op.factor),
      op.adds ? "true" : "false");
}

std::string scalar_json(const ScalarSides& s) {
  return fmt::format(
      "{{\"capture\": {}, \"replay\": {}, \"capture_reference\": {}, \"replay_reference\": {}, "
      "\"capture_rel_error\": {}, \"replay_rel_error\": {}}}",
      json_float(s.capture), json_float(s.replay), json_float(s.capture_reference),
      json_float(s.replay_reference), json_float(rel_error(s.capture, s.capture_reference)),
      json_float(rel_error(s.replay, s.replay_reference)));
}

}  // namespace

void judge_op(OpComparison& op) {
  const double a = op.capture.added.max_rel, b = op.replay.added.max_rel;
  op.bound = kBoundUnits * unit_roundoff(op.capture.dtype);
  const double smaller = std::max(std::min(a, b), std::numeric_limits<double>::min());
  op.factor = std::max(a, b) / smaller;
  if (std::max(a, b) <= op.bound) {
    op.closer = Closer::kBothWithinBound;
  } else {
    op.closer = a < b ? Closer::kCapture : Closer::kReplay;
  }
  op.adds = std::max(a, b) > op.bound && op.factor > 2;
  op.norm_difference = op.capture.norm != 0
                           ? std::abs(op.replay.norm - op.capture.norm) / std::abs(op.capture.norm)
                           : std::abs(op.replay.norm);
}

ReplayReport compare_replay(const CaptureRecord& capture, const CaptureRecord& replay,
                            const std::map<std::string, std::string>& capture_machine,
                            const std::map<std::string, std::string>& replay_machine) {
  ReplayReport r;
  r.step = capture.step;
  r.capture_reexecution_bitwise = capture.reexecution_bitwise;
  for (const auto& [key, value] : capture_machine) {
    if (ignored_machine_key(key)) continue;
    auto it = replay_machine.find(key);
    const std::string other = it == replay_machine.end() ? "(none)" : it->second;
    if (other != value) r.machine_differences.push_back({key, value, other});
  }
  for (const auto& [key, value] : replay_machine) {
    if (!ignored_machine_key(key) && !capture_machine.count(key))
      r.machine_differences.push_back({key, "(none)", value});
  }
  std::vector<OpComparison> differing;
  std::vector<const CapturedOp*> only_capture, only_replay;
  for (const auto& [c, x] : align_ops(capture.ops, replay.ops)) {
    if (!x) {
      only_capture.push_back(c);
    } else if (!c) {
      only_replay.push_back(x);
    } else {
      ++r.ops_compared;
      if (same_output(*c, *x)) continue;
      OpComparison op{*c, *x};
      judge_op(op);
      differing.push_back(op);
    }
  }
  if (!only_capture.empty() || !only_replay.empty()) {
    auto first_of = [](const std::vector<const CapturedOp*>& ops) {
      return ops.empty() ? std::string() : " (first: " + place(*ops.front()) + ")";
    };
    r.structure_difference =
        fmt::format("{} ops only in the capture{}, {} only here{}", only_capture.size(),
                    first_of(only_capture), only_replay.size(), first_of(only_replay));
  }
  r.ops_differing = static_cast<int64_t>(differing.size());
  if (!differing.empty()) {
    r.first = differing.front();
    std::vector<OpComparison> rest(differing.begin() + 1, differing.end());
    std::stable_sort(rest.begin(), rest.end(), [](const OpComparison& a, const OpComparison& b) {
      if (a.factor != b.factor) return a.factor > b.factor;
      return a.norm_difference > b.norm_difference;
    });
    if (rest.size() > 10) rest.resize(10);
    r.worst = std::move(rest);
  }
  const size_t grads = std::min(capture.gradients.size(), replay.gradients.size());
  r.gradients_compared = static_cast<int64_t>(grads);
  for (size_t i = 0; i < grads; ++i) {
    if (capture.gradients[i].checksum == replay.gradients[i].checksum &&
        capture.gradients[i].name == replay.gradients[i].name)
      continue;
    ++r.gradients_differing;
    // Gradients are listed in the model's order; the backward computes them from the last.
    r.first_gradient_differing = capture.gradients[i].name;
  }
  r.loss = {capture.loss, replay.loss, capture.reference_loss, replay.reference_loss};
  r.grad_norm = {capture.grad_norm, replay.grad_norm, capture.reference_grad_norm,
                 replay.reference_grad_norm};
  auto same_bits = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  r.identical = r.structure_difference.empty() && r.ops_differing == 0 &&
                r.gradients_differing == 0 && capture.gradients.size() == replay.gradients.size() &&
                same_bits(capture.loss, replay.loss) &&
                same_bits(capture.grad_norm, replay.grad_norm);
  return r;
}

std::string format_replay_text(const ReplayReport& r) {
  std::string out = fmt::format("replay of {} (step {}, captured by titan-train {})\n",
                                r.capture_folder, r.step, r.captured_by);
  out += "machine and build differences (capture -> replay):";
  if (r.machine_differences.empty()) out += " none";
  out += "\n";
  for (const auto& d : r.machine_differences)
    out += fmt::format("  {}: {} -> {}\n", d.key, d.capture, d.replay);
  if (!r.capture_reexecution_bitwise) {
    out +=
        "note: the capture's re-execution did not give its run's loss and grad_norm bits; the "
        "capture describes the re-execution\n";
  }
  if (r.identical) {
    out += fmt::format("bitwise identical: {} op outputs, {} gradients, the loss and grad_norm\n",
                       r.ops_compared, r.gradients_compared);
  } else {
    out +=
        fmt::format("parted: {} of {} op outputs differ, {} of {} gradients{}\n", r.ops_differing,
                    r.ops_compared, r.gradients_differing, r.gradients_compared,
                    r.first_gradient_differing.empty()
                        ? ""
                        : " (the first the backward computes: " + r.first_gradient_differing + ")");
    if (!r.structure_difference.empty())
      out += "the steps record different ops (the others are compared): " + r.structure_difference +
             "\n";
    if (r.first) out += "first op that differs:\n" + op_text(*r.first, true);
    if (!r.worst.empty()) {
      out += fmt::format("the {} other differing ops whose sides disagree most:\n", r.worst.size());
      for (const auto& op : r.worst) out += op_text(op, false);
    }
  }
  out += scalar_text("loss", r.loss);
  out += scalar_text("grad_norm", r.grad_norm);
  return out;
}

std::string format_replay_json(const ReplayReport& r) {
  std::string out = fmt::format(
      "{{\"capture\": {}, \"step\": {}, \"captured_by\": {}, \"identical\": {}, "
      "\"capture_reexecution_bitwise\": {},\n",
      json_quoted(r.capture_folder), r.step, json_quoted(r.captured_by),
      r.identical ? "true" : "false", r.capture_reexecution_bitwise ? "true" : "false");
  out += "\"machine_differences\": [";
  for (size_t i = 0; i < r.machine_differences.size(); ++i) {
    const auto& d = r.machine_differences[i];
    out += fmt::format("{}{{\"key\": {}, \"capture\": {}, \"replay\": {}}}", i ? ", " : "",
                       json_quoted(d.key), json_quoted(d.capture), json_quoted(d.replay));
  }
  out += "],\n";
  out += fmt::format(
      "\"ops_compared\": {}, \"ops_differing\": {}, \"gradients_compared\": {}, "
      "\"gradients_differing\": {}, \"first_gradient_differing\": {}, \"structure_difference\": "
      "{}, \"bound_units\": {},\n",
      r.ops_compared, r.ops_differing, r.gradients_compared, r.gradients_differing,
      json_quoted(r.first_gradient_differing), json_quoted(r.structure_difference),
      json_float(kBoundUnits));
  out += "\"first_op\": " + (r.first ? op_json(*r.first) : std::string("null")) + ",\n";
  out += "\"worst_ops\": [";
  for (size_t i = 0; i < r.worst.size(); ++i) out += (i ? ",\n  " : "\n  ") + op_json(r.worst[i]);
  out += "],\n";
  out += fmt::format("\"loss\": {},\n\"grad_norm\": {},\n\"seconds\": {}}}\n", scalar_json(r.loss),
                     scalar_json(r.grad_norm), json_float(r.seconds));
  return out;
}

}  // namespace titan

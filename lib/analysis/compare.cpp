#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "analysis/fingerprint_reader.h"
#include "config/loader.h"
#include "config/run_folder.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/hash.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr size_t kLossGrowthRows = 10;

std::optional<std::string> existing(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  return std::nullopt;
}

std::vector<HeaderDifference> header_differences(const FingerprintFile& a,
                                                 const FingerprintFile& b) {
  std::vector<HeaderDifference> out;
  for (const auto& [key, value] : a.header) {
    const std::string* other = b.header_value(key);
    if (!other || *other != value) out.push_back({key, value, other ? *other : "(absent)"});
  }
  for (const auto& [key, value] : b.header) {
    if (!a.header_value(key)) out.push_back({key, "(absent)", value});
  }
  return out;
}

// The two runs' config.toml differences, and whether both ran with debug.batch_invariant.
void compare_config_files(Comparison& c) {
  Config ca, cb;
  apply_toml_file(ca, *c.a.config);
  apply_toml_file(cb, *c.b.config);
  c.config_keys = config_differences(ca, cb);
  c.both_batch_invariant = ca.debug.batch_invariant && cb.debug.batch_invariant;
  c.configs_compared = true;
}

FieldDifference numeric_field(int64_t step, const char* field, double a, double b) {
  FieldDifference d;
  d.step = step;
  d.field = field;
  d.numeric = true;
  d.a = a;
  d.b = b;
  d.a_text = fmt::format("{:.17g} ({:a})", a, a);
  d.b_text = fmt::format("{:.17g} ({:a})", b, b);
  d.abs_diff = std::fabs(a - b);
  const double scale = std::max(std::fabs(a), std::fabs(b));
  d.rel_diff = scale > 0 ? d.abs_diff / scale : (same_bits(a, b) ? 0.0 : NAN);
  return d;
}

FieldDifference exact_field(int64_t step, const char* field, const std::string& a,
                            const std::string& b) {
  FieldDifference d;
  d.step = step;
  d.field = field;
  d.a_text = a;
  d.b_text = b;
  return d;
}

// Every field of one step that differs in its bits, in the order loss, grad_norm, lr, tokens,
// params (the parameter checksum only when both runs recorded it at this step).
std::vector<FieldDifference> step_differences(const FingerprintStep& a, const FingerprintStep& b) {
  std::vector<FieldDifference> out;
  if (!same_bits(a.loss, b.loss)) out.push_back(numeric_field(a.step, "loss", a.loss, b.loss));
  if (!same_bits(a.grad_norm, b.grad_norm))
    out.push_back(numeric_field(a.step, "grad_norm", a.grad_norm, b.grad_norm));
  if (!same_bits(a.lr, b.lr)) out.push_back(numeric_field(a.step, "lr", a.lr, b.lr));
  if (a.tokens != b.tokens) {
    out.push_back(
        exact_field(a.step, "tokens", std::to_string(a.tokens), std::to_string(b.tokens)));
  }
  if (a.params && b.params && *a.params != *b.params) {
    out.push_back(exact_field(a.step, "params", fmt::format("{:016x}", *a.params),
                              fmt::format("{:016x}", *b.params)));
  }
  return out;
}

bool beyond_tolerance(const FieldDifference& d, double tolerance) {
  if (d.field == "params") return false;  // other hardware computes other bits
  if (!d.numeric) return true;
  return !(d.rel_diff <= tolerance);  // NaN against a number is beyond any tolerance
}

void compare_steps(Comparison& c, const FingerprintFile& a, const FingerprintFile& b) {
  for (int64_t i = 0; i < c.common_steps; ++i) {
    for (auto& d : step_differences(a.steps[i], b.steps[i])) {
      if (d.numeric && std::isfinite(d.rel_diff))
        c.max_rel_diff = std::max(c.max_rel_diff, d.rel_diff);
      if (!c.first_difference) c.first_difference = d;
      if (c.tolerance && !c.first_beyond_tolerance && beyond_tolerance(d, *c.tolerance)) {
        c.first_beyond_tolerance = d;
      }
    }
  }
  c.identical = !c.first_difference;
  const auto& from = c.tolerance ? c.first_beyond_tolerance : c.first_difference;
  if (!from) return;
  for (int64_t s = from->step; s <= c.common_steps && c.loss_growth.size() < kLossGrowthRows; ++s) {
    auto d = numeric_field(s, "loss", a.steps[s - 1].loss, b.steps[s - 1].loss);
    c.loss_growth.push_back({s, d.a, d.b, d.abs_diff, d.rel_diff});
  }
}

bool same_entry(const NumericsEntry& a, const NumericsEntry& b) {
  return a.kind == b.kind && a.name == b.name && a.micro_batch == b.micro_batch &&
         a.position == b.position && a.op == b.op;
}

// Within a relative tolerance: |a - b| <= tolerance x scale (NaN never is).
bool within(double a, double b, double scale, double tolerance) {
  return std::fabs(a - b) <= tolerance * scale;
}

// Without a tolerance, the bits (checksums); with one, the statistics: another implementation of
// the same function rounds differently, so its checksums never match but its mean and max_abs
// agree to a few ulps, each relative to the larger max_abs (a mean near 0 has no scale of its own).
bool same_values(const NumericsEntry& a, const NumericsEntry& b, std::optional<double> tolerance) {
  if (a.kind != NumericsKind::kOp) {
    if (!tolerance) return a.stats.checksum == b.stats.checksum;
    const double scale = std::max(a.stats.max_abs, b.stats.max_abs);
    return within(a.stats.mean, b.stats.mean, scale, *tolerance) &&
           within(a.stats.max_abs, b.stats.max_abs, scale, *tolerance);
  }
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const auto &x = a.outputs[i], &y = b.outputs[i];
    if (x.dtype != y.dtype || x.sizes != y.sizes || x.device != y.device || x.hashed != y.hashed) {
      return false;
    }
    if (!tolerance) {
      if (x.checksum != y.checksum) return false;
    } else if (x.max_abs && y.max_abs) {
      const double scale = std::max(*x.max_abs, *y.max_abs);
      if (!within(*x.max_abs, *y.max_abs, scale, *tolerance)) return false;
    } else if (x.checksum != y.checksum) {
      return false;  // not floating: exact
    }
  }
  return true;
}

std::vector<NumericsEntry> without_ops(std::vector<NumericsEntry> entries) {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const auto& e) { return e.kind == NumericsKind::kOp; }),
                entries.end());
  return entries;
}

std::optional<NumericsEntry> entry_at(const std::vector<NumericsEntry>& v, size_t i) {
  if (i < v.size()) return v[i];
  return std::nullopt;
}

// Walks both lists in order. Sets `op` at the first op whose outputs differ and `block` at the
// first other entry that differs (or where the lists stop listing the same entries), then stops.
void first_differences(const std::vector<NumericsEntry>& a, const std::vector<NumericsEntry>& b,
                       std::optional<double> tolerance, std::optional<NumericsDifference>& block,
                       std::optional<NumericsDifference>* op) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    auto ea = entry_at(a, i), eb = entry_at(b, i);
    if (ea && eb && same_entry(*ea, *eb)) {
      if (same_values(*ea, *eb, tolerance)) continue;
      if (ea->kind == NumericsKind::kOp) {
        if (op && !*op) *op = NumericsDifference{ea, eb};
        continue;
      }
    }
    block = NumericsDifference{ea, eb};
    return;
  }
}

}  // namespace

bool Comparison::diverged() const {
  return tolerance ? first_beyond_tolerance.has_value() : !identical;
}

RunFiles locate_run(const std::string& arg) {
  RunFiles run;
  run.arg = arg;
  std::error_code ec;
  std::optional<int64_t> rank;
  std::string folder;
  if (fs::is_directory(arg, ec)) {
    folder = arg;
    rank = 0;
    run.fingerprint = RunFolder(folder).file(RunFile::kFingerprint);
  } else {
    run.fingerprint = arg;
    folder = fs::path(arg).parent_path().string();
    if (folder.empty()) folder = ".";
    // Files beside a fingerprint.log given by name belong to the same run, and beside rank N's
    // fingerprint.rank<N>.log so do config.toml (one per run) and numerics.rank<N>.log; beside
    // another file name they may not.
    rank = rank_of_copy(RunFile::kFingerprint, fs::path(arg).filename().string());
  }
  if (!fs::is_regular_file(run.fingerprint, ec)) {
    throw ConfigError(arg,
                      fs::exists(arg, ec) ? "has no fingerprint.log" : "no such file or folder",
                      "pass a run's dump folder (job.dump_folder) or its fingerprint.log");
  }
  if (rank) {
    const RunFolder files(folder);
    run.config = existing(files.file(RunFile::kConfig));
    run.numerics = existing(files.file(RunFile::kNumerics, *rank));
  }
  return run;
}

NumericsComparison compare_numerics(const NumericsLogFile& a, const NumericsLogFile& b,
                                    std::optional<double> tolerance) {
  NumericsComparison n;
  n.compared = true;
  n.tolerance = tolerance;
  const bool ops = a.level == "ops" && b.level == "ops";
  if (a.level != b.level) n.note = "only one run traced ops: op lines left out";
  size_t j = 0;
  for (const auto& sa : a.steps) {
    while (j < b.steps.size() && b.steps[j].step < sa.step) ++j;
    if (j == b.steps.size()) break;
    const auto& sb = b.steps[j];
    if (sb.step != sa.step) continue;
    if (ops) {
      first_differences(sa.forward, sb.forward, tolerance, n.forward, &n.op);
    } else {
      first_differences(without_ops(sa.forward), without_ops(sb.forward), tolerance, n.forward,
                        nullptr);
    }
    first_differences(sa.gradients, sb.gradients, tolerance, n.gradient, nullptr);
    if (n.forward || n.op || n.gradient) {
      n.step = sa.step;
      return n;
    }
  }
  return n;
}

Comparison compare_runs(const std::string& run_a, const std::string& run_b,
                        std::optional<double> tolerance) {
  Comparison c;
  c.tolerance = tolerance;
  c.a = locate_run(run_a);
  c.b = locate_run(run_b);
  // Everything is read and checked before anything is reported.
  const FingerprintFile fa = read_fingerprint_log(c.a.fingerprint);
  const FingerprintFile fb = read_fingerprint_log(c.b.fingerprint);
  std::optional<NumericsLogFile> na, nb;
  if (c.a.numerics && c.b.numerics) {
    na = read_numerics_log(*c.a.numerics);
    nb = read_numerics_log(*c.b.numerics);
  }
  if (c.a.config && c.b.config) {
    compare_config_files(c);
  }
  c.header = header_differences(fa, fb);
  c.steps_a = static_cast<int64_t>(fa.steps.size());
  c.steps_b = static_cast<int64_t>(fb.steps.size());
  c.common_steps = std::min(c.steps_a, c.steps_b);
  if (c.common_steps == 0) {
    const auto& empty = c.steps_a == 0 ? fa : fb;
    throw ConfigError(empty.path, "has no step lines: nothing to compare",
                      "the run stopped before its first step; compare runs that trained");
  }
  compare_steps(c, fa, fb);
  if (na && nb) {
    c.numerics = compare_numerics(*na, *nb, tolerance);
  } else {
    c.numerics.note = (c.a.numerics || c.b.numerics)
                          ? "only one run has numerics.log"
                          : "no numerics.log (set debug.numerics_trace to locate the tensor)";
  }
  return c;
}

}  // namespace titan

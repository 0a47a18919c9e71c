#include "ac/recompute_check.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "util/files.h"
#include "util/strings.h"

namespace titan::ac {
namespace {

bool same_meta(const OutputMeta& a, const OutputMeta& b, bool compare_checksums) {
  if (a.dtype != b.dtype || a.device != b.device || a.sizes != b.sizes) return false;
  if (compare_checksums && a.hashed && b.hashed && a.checksum != b.checksum) return false;
  return true;
}

bool same_op(const OpRecord& a, const OpRecord& b, bool compare_checksums) {
  if (a.name != b.name && std::strcmp(a.name, b.name) != 0) return false;
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (!same_meta(a.outputs[i], b.outputs[i], compare_checksums)) return false;
  }
  return true;
}

std::string describe_op(const OpTrace& trace, size_t index, bool with_checksums) {
  if (index >= trace.ops.size()) return "(no op: the trace ended)";
  const OpRecord& op = trace.ops[index];
  std::string outputs;
  for (const auto& out : op.outputs) {
    if (!outputs.empty()) outputs += ", ";
    outputs += describe_meta(out);
    if (with_checksums)
      outputs += out.hashed ? fmt::format(" checksum {:016x}", out.checksum) : " (not hashed)";
  }
  return fmt::format("{} -> {}", op.name, outputs.empty() ? "no tensor outputs" : outputs);
}

}  // namespace

std::optional<size_t> first_difference(const OpTrace& a, const OpTrace& b, bool compare_checksums) {
  const size_t common = std::min(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < common; ++i) {
    if (!same_op(a.ops[i], b.ops[i], compare_checksums)) return i;
  }
  if (a.ops.size() != b.ops.size()) return common;
  return std::nullopt;
}

std::string format_traces(const RecomputeComparison& c, std::optional<size_t> divergent) {
  auto section = [&](const char* title, const OpTrace& trace) {
    std::string out = fmt::format("{} ({} ops):\n", title, trace.ops.size());
    for (size_t i = 0; i < trace.ops.size(); ++i) {
      out += fmt::format("{} {}\n", divergent == i ? ">>" : "  ", trace.format_line(i));
    }
    return out;
  };
  return "# the first divergent op is marked >>; $N names a tensor, #... is a checksum of its "
         "bytes\n" +
         section("forward", *c.forward) + section("recompute", *c.recompute);
}

void raise_on_mismatch(const RecomputeComparison& c) {
  const bool bitwise = c.check == RecomputeCheck::kBitwise;
  std::optional<size_t> at = first_difference(*c.forward, *c.recompute, bitwise);
  const bool output_differs = bitwise && c.forward_output_checksum != c.recompute_output_checksum;
  if (!at && !output_differs) return;

  std::string finding;
  if (at) {
    const size_t n = std::max(c.forward->ops.size(), c.recompute->ops.size());
    const char* name =
        *at < c.forward->ops.size() ? c.forward->ops[*at].name : c.recompute->ops[*at].name;
    finding = fmt::format(
        "op {} of {} ({}) differs (determinism_check = \"{}\")\n  forward:   {}\n  recompute: "
        "{}\n  ops run: forward {}, recompute {}",
        *at, n, name, bitwise ? "bitwise" : "default", describe_op(*c.forward, *at, bitwise),
        describe_op(*c.recompute, *at, bitwise), c.forward->ops.size(), c.recompute->ops.size());
  } else {
    finding = fmt::format(
        "every op matched but the block output differs (forward checksum {:016x}, recompute "
        "{:016x})",
        c.forward_output_checksum, c.recompute_output_checksum);
  }
  throw RecomputeMismatch(c.block_name, finding, c.debug ? format_traces(c, at) : "", c.debug,
                          c.debug_dir);
}

namespace {

constexpr const char* kDebugHint =
    "set activation_checkpoint.debug = true to print both op traces and save them under "
    "<dump_folder>/ac_debug/";

std::string unnamed_message(const std::string& where, const std::string& finding) {
  return fmt::format("activation checkpoint recompute mismatch at {}: {}", where, finding);
}

}  // namespace

RecomputeMismatch::RecomputeMismatch(std::string block, std::string finding, std::string traces,
                                     bool debug, std::string debug_dir)
    : CheckFailure(
          unnamed_message("block " + block, finding),
          debug ? "both op traces are printed and saved once the step is named" : kDebugHint),
      block_(std::move(block)),
      finding_(std::move(finding)),
      traces_(std::move(traces)),
      debug_(debug),
      debug_dir_(std::move(debug_dir)) {}

RecomputeMismatch::RecomputeMismatch(const RecomputeMismatch& unnamed, int64_t step,
                                     const std::string& hint, const std::string& details)
    : CheckFailure(
          unnamed_message(fmt::format("step {}, block {}", step, unnamed.block_), unnamed.finding_),
          hint, details),
      block_(unnamed.block_),
      finding_(unnamed.finding_),
      debug_(unnamed.debug_),
      debug_dir_(unnamed.debug_dir_) {}

RecomputeMismatch RecomputeMismatch::at_step(int64_t step) const {
  if (!debug_) {
    return RecomputeMismatch(*this, step, kDebugHint);
  }
  const std::string traces =
      fmt::format("# {} at step {}: ops of the original forward and of the recomputation\n", block_,
                  step) +
      traces_;
  std::string hint;
  if (!debug_dir_.empty()) {
    const std::string path = fmt::format("{}/step{}_{}.txt", debug_dir_, step, block_);
    try {
      make_output_folder(debug_dir_, FolderLink::kRefuse);
      write_file_atomically(path, traces);
      hint = fmt::format("both op traces are in {}", path);
    } catch (const std::exception& e) {
      // The mismatch is the news; a trace file that cannot be written must not hide it.
      hint = fmt::format("the op traces (above) could not be written: {}", e.what());
    }
  }
  return RecomputeMismatch(*this, step, hint, traces);
}

}  // namespace titan::ac

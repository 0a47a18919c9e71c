#include "ac/recompute_check.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <iostream>

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

std::string debug_file_name(const RecomputeComparison& c) {
  return fmt::format("{}/step{}_{}.txt", c.debug_dir, c.step, c.block_name);
}

void write_debug_file(const RecomputeComparison& c, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(c.debug_dir, ec);
  write_file_atomically(debug_file_name(c), text);
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
  std::string out =
      fmt::format("# {} at step {}: ops of the original forward and of the recomputation\n",
                  c.block_name, c.step);
  out +=
      "# the first divergent op is marked >>; $N names a tensor, #... is a checksum of its bytes\n";
  return out + section("forward", *c.forward) + section("recompute", *c.recompute);
}

void raise_on_mismatch(const RecomputeComparison& c) {
  const bool bitwise = c.check == RecomputeCheck::kBitwise;
  std::optional<size_t> at = first_difference(*c.forward, *c.recompute, bitwise);
  const bool output_differs = bitwise && c.forward_output_checksum != c.recompute_output_checksum;
  if (!at && !output_differs) return;

  std::string where = fmt::format("step {}, block {}", c.step, c.block_name);
  std::string message;
  if (at) {
    const size_t n = std::max(c.forward->ops.size(), c.recompute->ops.size());
    const char* name =
        *at < c.forward->ops.size() ? c.forward->ops[*at].name : c.recompute->ops[*at].name;
    message = fmt::format(
        "activation checkpoint recompute mismatch at {}: op {} of {} ({}) differs "
        "(determinism_check = \"{}\")\n  forward:   {}\n  recompute: {}\n  ops run: forward {}, "
        "recompute {}",
        where, *at, n, name, bitwise ? "bitwise" : "default", describe_op(*c.forward, *at, bitwise),
        describe_op(*c.recompute, *at, bitwise), c.forward->ops.size(), c.recompute->ops.size());
  } else {
    message = fmt::format(
        "activation checkpoint recompute mismatch at {}: every op matched but the block output "
        "differs (forward checksum {:016x}, recompute {:016x})",
        where, c.forward_output_checksum, c.recompute_output_checksum);
  }
  std::string hint;
  if (c.debug) {
    std::string traces = format_traces(c, at);
    std::cerr << traces;
    if (!c.debug_dir.empty()) {
      write_debug_file(c, traces);
      hint = fmt::format("both op traces are in {}", debug_file_name(c));
    }
  } else {
    hint =
        "set activation_checkpoint.debug = true to print both op traces and save them under "
        "<dump_folder>/ac_debug/";
  }
  throw RecomputeMismatch(message, hint);
}

}  // namespace titan::ac

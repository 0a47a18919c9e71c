#include "metrics/metrics.h"

#include <fmt/format.h>

#include <cmath>

#include "util/strings.h"

namespace titan {

// JSON has no NaN/inf: write them as strings so the line stays valid.
std::string json_number(double v) {
  if (std::isfinite(v)) return fmt::format("{}", v);
  return fmt::format("\"{}\"", v);
}

int64_t jsonl_line_step(const std::string& line) { return step_after_prefix(line, "{\"step\": "); }

const ConsoleColors& console_colors(bool on) {
  // torchtitan's: ANSI foreground colours, orange and turquoise as 24-bit ones, and a reset to
  // the default foreground (39) rather than every attribute (0).
  static const ConsoleColors colors{"\033[31m",
                                    "\033[32m",
                                    "\033[33m",
                                    "\033[34m",
                                    "\033[35m",
                                    "\033[36m",
                                    "\033[38;2;180;60;0m",
                                    "\033[38;2;54;234;195m",
                                    "\033[39m"};
  static const ConsoleColors none{};
  return on ? colors : none;
}

std::string format_console_line(const StepMetrics& m, const ConsoleColors& c) {
  return fmt::format(
      "{}step: {:2}  {}loss: {:8.5f}  {}grad_norm: {:7.4f}  {}memory: {:5.2f}GiB({:.2f}%)  {}tps: "
      "{}  {}tflops: {:.2f}  {}mfu: {:.2f}%{}  lr: {:.4e}",
      c.red, m.step, c.green, m.loss, c.orange, m.grad_norm, c.turquoise, m.memory_gib,
      m.memory_pct, c.blue, with_thousands(std::llround(m.tps)), c.cyan, m.tflops, c.magenta,
      m.mfu_pct, c.reset, m.lr);
}

namespace {
// ', "moe": {...}', or "" for a dense model.
std::string moe_json(const StepMetrics& m) {
  if (m.moe.empty()) return "";
  std::string layers;
  for (const ExpertLoadStats& l : m.moe) {
    layers += fmt::format("{}\"{}\": {{\"max\": {}, \"mean\": {}, \"max_over_mean\": {}}}",
                          layers.empty() ? "" : ", ", l.name, json_number(l.max),
                          json_number(l.mean), json_number(l.max_over_mean()));
  }
  return ", \"moe\": {" + layers + "}";
}
}  // namespace

std::string format_moe_load_line(const StepMetrics& m) {
  if (m.moe.empty()) return "";
  std::string out = "moe load (max/mean tokens per expert):";
  for (size_t i = 0; i < m.moe.size(); ++i) {
    out += fmt::format("{}{} {:.2f}", i == 0 ? " " : "  ", m.moe[i].name, m.moe[i].max_over_mean());
  }
  return out;
}

std::string format_json_line(const StepMetrics& m) {
  std::string layers;
  for (const PartNorms& p : m.layers) {
    layers += fmt::format(
        "{}\"{}\": {{\"grad_norm\": {}, \"weight_norm\": {}, \"update_norm\": {}, "
        "\"update_ratio\": {}}}",
        layers.empty() ? "" : ", ", p.name, json_number(p.grad_norm), json_number(p.weight_norm),
        json_number(p.update_norm), json_number(p.update_ratio()));
  }
  return fmt::format(
      "{{\"step\": {}, \"loss\": {}, \"grad_norm\": {}, \"lr\": {}, \"tokens_seen\": {}, "
      "\"max_loss\": {}, \"memory_gib\": {}, \"memory_pct\": {}, \"tps\": {}, "
      "\"tflops\": {}, \"mfu_pct\": {}, \"step_time_s\": {}, \"cpu_user_s\": {}, "
      "\"cpu_system_s\": {}, \"minor_faults\": {}, \"layers\": {{{}}}{}}}",
      m.step, json_number(m.loss), json_number(m.grad_norm), json_number(m.lr), m.tokens_seen,
      json_number(m.max_loss), json_number(m.memory_gib), json_number(m.memory_pct),
      json_number(m.tps), json_number(m.tflops), json_number(m.mfu_pct), json_number(m.step_time_s),
      json_number(m.cpu_user_s), json_number(m.cpu_system_s), json_number(m.minor_faults), layers,
      moe_json(m));
}

namespace {

const std::string& prepared(const std::string& path, int64_t resume_step) {
  if (resume_step > 0) rewrite_log_through_step(path, "", resume_step, jsonl_line_step);
  return path;
}

}  // namespace

JsonlWriter::JsonlWriter(const std::string& path, int64_t resume_step)
    : file_(prepared(path, resume_step),
            resume_step > 0 ? LineFile::Mode::kAppend : LineFile::Mode::kTruncate) {}

void JsonlWriter::write(const StepMetrics& m) { file_.write(format_json_line(m)); }

void JsonlWriter::write_line(const std::string& line) { file_.write(line); }

}  // namespace titan

#include "analysis/numerics_reader.h"

#include <fmt/format.h>

#include "analysis/log_text.h"

namespace titan {
namespace {

// The part of a parsed line after its name: "checksum X mean M max_abs A".
TensorStats parse_stats(const std::vector<std::string>& w, size_t from, const std::string& path,
                        int64_t line) {
  if (w.size() != from + 6 || w[from] != "checksum" || w[from + 2] != "mean" ||
      w[from + 4] != "max_abs") {
    throw_bad_line(path, line,
                   "expected \"checksum <16 hex> mean <hex float> max_abs <hex float>\"");
  }
  TensorStats s;
  s.checksum = parse_hex64(w[from + 1], "checksum", path, line);
  s.mean = parse_exact_double(w[from + 3], "mean", path, line);
  s.max_abs = parse_exact_double(w[from + 5], "max_abs", path, line);
  return s;
}

// "f32[2,32,64]" (dtype, sizes, "@device" off the CPU) into `out`.
void parse_op_meta(const std::string& meta, OpOutput& out, const std::string& path, int64_t line) {
  const size_t open = meta.find('['), close = meta.find(']');
  if (open == 0 || open == std::string::npos || close == std::string::npos || close < open ||
      (close + 1 < meta.size() && meta[close + 1] != '@')) {
    throw_bad_line(path, line, fmt::format("op output \"{}\" is not dtype[sizes]", meta));
  }
  out.dtype = meta.substr(0, open);
  const std::string sizes = meta.substr(open + 1, close - open - 1);
  if (!sizes.empty()) {
    for (const auto& size : split_list(sizes, ',')) {
      out.sizes.push_back(parse_integer(size, "op output size", path, line));
    }
  }
  if (close + 1 < meta.size()) out.device = meta.substr(close + 2);
}

// "f32[2,32,64]" or "f32[2,32,64]:<16 hex>:<max_abs>".
OpOutput parse_op_output(const std::string& word, const std::string& path, int64_t line) {
  OpOutput out;
  const size_t colon = word.find(':');
  parse_op_meta(word.substr(0, colon), out, path, line);
  if (colon == std::string::npos) return out;
  const size_t second = word.find(':', colon + 1);
  if (second == std::string::npos) {
    throw_bad_line(path, line, fmt::format("op output \"{}\" lacks its max_abs", word));
  }
  out.hashed = true;
  out.checksum = parse_hex64(word.substr(colon + 1, second - colon - 1), "op checksum", path, line);
  const std::string max_abs = word.substr(second + 1);
  if (max_abs != "-") out.max_abs = parse_exact_double(max_abs, "op max_abs", path, line);
  return out;
}

class Parser {
 public:
  explicit Parser(const std::string& path) { file_.path = path; }

  NumericsLogFile run(const std::vector<LogLine>& lines) {
    if (lines.empty() || lines[0].text.rfind(kNumericsMagic, 0) != 0) {
      throw_bad_line(file_.path, 1,
                     fmt::format("not a numerics.log (expected \"{}\")", kNumericsMagic),
                     "pass the numerics.log a run wrote with debug.numerics_trace set");
    }
    for (size_t i = 1; i < lines.size(); ++i) parse_line(lines[i].number, lines[i].text);
    if (file_.level.empty()) throw_bad_line(file_.path, 2, "missing \"level\" line");
    if (open_) {
      throw_bad_line(file_.path, lines.back().number,
                     fmt::format("step {} has no \"end step\" line (truncated?)", step().step));
    }
    return std::move(file_);
  }

 private:
  NumericsStep& step() { return file_.steps.back(); }

  void parse_line(int64_t n, const std::string& text) {
    const auto w = split_words(text);
    const std::string& path = file_.path;
    if (w.empty()) throw_bad_line(path, n, "empty line");
    const std::string& kind = w[0];
    if (kind == "level" && w.size() == 2 && (w[1] == "blocks" || w[1] == "ops")) {
      file_.level = w[1];
    } else if (kind == "freq" && w.size() == 2) {
      file_.freq = parse_integer(w[1], "freq", path, n);
    } else if (kind == "step" && w.size() == 4 && w[2] == "micro") {
      begin_micro(parse_integer(w[1], "step", path, n), parse_integer(w[3], "micro", path, n), n);
    } else if (kind == "step" && w.size() == 3 && w[2] == "grads") {
      expect_open(n, parse_integer(w[1], "step", path, n));
      in_grads_ = true;
    } else if (kind == "end" && w.size() == 3 && w[1] == "step") {
      expect_open(n, parse_integer(w[2], "step", path, n));
      open_ = false;
    } else if ((kind == "fwd" || kind == "grad") && w.size() >= 2) {
      add_tensor(kind == "fwd", w, n);
    } else if (kind == "op" && w.size() >= 4) {
      add_op(w, n);
    } else {
      throw_bad_line(path, n, fmt::format("unrecognised line \"{}\"", text),
                     "numerics.log lines start with level, freq, step, fwd, op, grad or end");
    }
  }

  void begin_micro(int64_t s, int64_t micro, int64_t n) {
    if (!open_) {
      if (!file_.steps.empty() && s <= step().step) {
        throw_bad_line(file_.path, n, fmt::format("step {} after step {}", s, step().step));
      }
      file_.steps.push_back(NumericsStep{s, n, {}, {}});
      open_ = true;
      in_grads_ = false;
    } else if (s != step().step || in_grads_) {
      throw_bad_line(file_.path, n, fmt::format("step {} has no \"end step\" line", step().step));
    }
    micro_ = micro;
  }

  void expect_open(int64_t n, int64_t s) {
    if (!open_ || s != step().step) {
      throw_bad_line(file_.path, n, fmt::format("step {} does not match the open step", s));
    }
  }

  void add_tensor(bool forward, const std::vector<std::string>& w, int64_t n) {
    if (!open_ || in_grads_ == forward) {
      throw_bad_line(file_.path, n,
                     forward ? "forward line outside a step's forward"
                             : "gradient line outside "
                               "a step's grads");
    }
    NumericsEntry e;
    e.kind = forward ? NumericsKind::kForward : NumericsKind::kGradient;
    e.micro_batch = micro_;
    e.name = w[1];
    e.stats = parse_stats(w, 2, file_.path, n);
    e.line = n;
    (forward ? step().forward : step().gradients).push_back(std::move(e));
  }

  void add_op(const std::vector<std::string>& w, int64_t n) {
    if (!open_ || in_grads_) throw_bad_line(file_.path, n, "op line outside a step's forward");
    NumericsEntry e;
    e.kind = NumericsKind::kOp;
    e.micro_batch = micro_;
    e.name = w[1];
    e.position = parse_integer(w[2], "op position", file_.path, n);
    e.op = w[3];
    for (size_t i = 4; i < w.size(); ++i) e.outputs.push_back(parse_op_output(w[i], file_.path, n));
    e.line = n;
    step().forward.push_back(std::move(e));
  }

  NumericsLogFile file_;
  bool open_ = false;
  bool in_grads_ = false;
  int64_t micro_ = 0;
};

}  // namespace

NumericsLogFile parse_numerics_log(const std::string& text, const std::string& path) {
  return Parser(path).run(split_log_lines(text, path));
}

NumericsLogFile read_numerics_log(const std::string& path) {
  return parse_numerics_log(read_log_file(path, ""), path);
}

}  // namespace titan

#include "analysis/fingerprint_reader.h"

#include <fmt/format.h>

#include "analysis/log_text.h"
#include "metrics/fingerprint.h"

namespace titan {
namespace {

// Keys FingerprintLog::format_header writes, in order.
const std::vector<std::string>& header_keys() {
  static const std::vector<std::string> keys = {"titan_train_version",
                                                "libtorch_version",
                                                "device",
                                                "config_hash",
                                                "seed",
                                                "deterministic",
                                                "deterministic_warn_only",
                                                "cudnn_deterministic",
                                                "cublas_workspace_config",
                                                "cpu_threads",
                                                "world_size"};
  return keys;
}

// "step 3 loss 0x1p+3 (8) grad_norm 0x1p+0 (1) lr 0x1p-10 tokens 64 [params <16 hex>]"
FingerprintStep parse_step(const std::vector<std::string>& w, const std::string& path, int64_t n) {
  const bool ok = (w.size() == 12 || w.size() == 14) && w[0] == "step" && w[2] == "loss" &&
                  w[5] == "grad_norm" && w[8] == "lr" && w[10] == "tokens" &&
                  (w.size() == 12 || w[12] == "params");
  if (!ok) {
    throw_bad_line(path, n,
                   "expected \"step N loss <hex> (<dec>) grad_norm <hex> (<dec>) lr <hex> tokens N "
                   "[params <16 hex>]\"");
  }
  FingerprintStep s;
  s.line = n;
  s.step = parse_integer(w[1], "step", path, n);
  s.loss = parse_exact_double(w[3], "loss", path, n);
  s.grad_norm = parse_exact_double(w[6], "grad_norm", path, n);
  s.lr = parse_exact_double(w[9], "lr", path, n);
  s.tokens = parse_integer(w[11], "tokens", path, n);
  if (w.size() == 14) s.params = parse_hex64(w[13], "params", path, n);
  return s;
}

}  // namespace

const std::string* FingerprintFile::header_value(const std::string& key) const {
  for (const auto& [k, v] : header) {
    if (k == key) return &v;
  }
  return nullptr;
}

FingerprintFile parse_fingerprint_log(const std::string& text, const std::string& path) {
  FingerprintFile file;
  file.path = path;
  const auto lines = split_log_lines(text, path);
  if (lines.empty() || lines[0].text.rfind(kFingerprintMagic, 0) != 0) {
    throw_bad_line(path, 1,
                   lines.empty()
                       ? std::string("empty file")
                       : fmt::format("not a fingerprint.log (expected \"{}\")", kFingerprintMagic),
                   "pass a dump folder or the fingerprint.log a titan-train run wrote");
  }
  size_t i = 1;
  for (; i < lines.size() && lines[i].text.rfind("step ", 0) != 0; ++i) {
    const auto& text_line = lines[i].text;
    const size_t space = text_line.find(' ');
    if (space == std::string::npos)
      throw_bad_line(path, lines[i].number, "header line has no value");
    file.header.emplace_back(text_line.substr(0, space), text_line.substr(space + 1));
  }
  for (const auto& key : header_keys()) {
    if (!file.header_value(key)) {
      throw_bad_line(path, i < lines.size() ? lines[i].number : int64_t(lines.size()),
                     fmt::format("the header has no \"{}\" line", key));
    }
  }
  for (; i < lines.size(); ++i) {
    const int64_t n = lines[i].number;
    const auto w = split_words(lines[i].text);
    FingerprintStep s = parse_step(w, path, n);
    const int64_t expected = file.steps.empty() ? 1 : file.steps.back().step + 1;
    if (s.step != expected) {
      throw_bad_line(path, n, fmt::format("step {} where step {} was expected", s.step, expected));
    }
    file.steps.push_back(s);
  }
  return file;
}

FingerprintFile read_fingerprint_log(const std::string& path) {
  return parse_fingerprint_log(read_log_file(path, "pass a dump folder or a fingerprint.log"),
                               path);
}

}  // namespace titan

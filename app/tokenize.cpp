#include "app/tokenize.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <ostream>

#include "config/loader.h"
#include "data/sources.h"
#include "data/text_encoding.h"
#include "model/model_args.h"
#include "util/error.h"
#include "util/files.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

struct TokenizeRequest {
  std::vector<std::string> config_args = {"titan-train"};
  std::string output;
  bool force = false;
  bool help = false;
};

std::string tokenize_usage() {
  return "usage: titan-train tokenize [--config FILE] [--section.key VALUE ...] -o OUT.bin "
         "[--force]\n"
         "Writes the training dataset's token stream as the loader reads it (documents in its\n"
         "order, each with the BOS and EOS it adds) as raw little-endian uint32: train from it\n"
         "with --training.dataset tokens --training.dataset_path OUT.bin\n"
         "--training.dataset_token_dtype uint32. The text is tokenized by model.hf_assets_path's\n"
         "tokenizer (bytewise without one). OUT is kept unless --force.\n";
}

TokenizeRequest parse_tokenize_args(const std::vector<std::string>& args) {
  TokenizeRequest r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) throw ConfigError(a, "needs a file name", "write -o OUT.bin");
      r.output = args[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      r.output = a.substr(9);
    } else if (a == "--force") {
      r.force = true;
    } else if (a == "--help" || a == "-h") {
      r.help = true;
    } else {
      r.config_args.push_back(a);
    }
  }
  if (!r.help && r.output.empty())
    throw ConfigError("tokenize", "no output file", "write -o OUT.bin");
  return r;
}

void check_tokenize_output(const TokenizeRequest& r) {
  struct stat st {};
  const bool exists = ::lstat(r.output.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    throw FileRefused(r.output, "is " + file_type_name(st.st_mode) + ", not a regular file",
                      "tokenize writes a regular .bin file; choose another -o");
  }
  if (exists && !r.force)
    throw ConfigError(r.output, "exists", "remove it, choose another -o, or pass --force");
}

void check_text_dataset(const Config& config) {
  const DatasetKind kind = config.training.dataset;
  if (kind == DatasetKind::kSynthetic || kind == DatasetKind::kTokens) {
    throw ConfigError("training.dataset",
                      fmt::format("\"{}\" is not a text dataset", to_string(kind)),
                      "tokenize reads text, jsonl, c4, c4_test or c4_validation");
  }
}

}  // namespace

int run_tokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& progress) {
  const TokenizeRequest r = parse_tokenize_args(args);
  if (r.help) {
    out << tokenize_usage();
    return kExitOk;
  }
  const CliRequest request = parse_command_line(r.config_args);
  const Config& config = request.config;
  check_text_dataset(config);
  check_tokenize_output(r);
  const int64_t vocab_size = model_args_for_flavor(config.model.flavor).vocab_size;
  const TextEncoding text = text_encoding_for(config, vocab_size);
  for (const auto& note : text.notes) progress << "[titan] " << note << "\n";
  const auto source = make_token_source(training_dataset(config.training), 0,
                                        config.training.seq_len + 1, vocab_size, text.encoder);
  const auto start = SteadyClock::now();
  const std::string tmp = r.output + ".tmp";
  std::remove(tmp.c_str());
  HashedFileWriter writer(tmp);
  const uint64_t documents = source->num_documents();
  uint64_t tokens = 0;
  double next_report = 2.0;
  for (uint64_t d = 0; d < documents; ++d) {
    const std::vector<int32_t> ids = source->document(d);
    // int32 ids are non-negative: their bytes are those of uint32 on a little-endian machine.
    writer.write(ids.data(), ids.size() * sizeof(int32_t));
    tokens += ids.size();
    if (seconds_since(start) >= next_report) {
      progress << fmt::format("[titan] tokenize: {}/{} documents, {} tokens, {:.1f} s\n", d + 1,
                              documents, tokens, seconds_since(start))
               << std::flush;
      next_report += 2.0;
    }
  }
  writer.finish();
  if (std::rename(tmp.c_str(), r.output.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeFailure(fmt::format("cannot write {}", r.output));
  }
  const double seconds = seconds_since(start);
  out << fmt::format(
      "tokenize: wrote {} tokens (uint32) of {} documents to {} in {:.2f} s ({:.0f} "
      "tokens/s); data: {}\n",
      tokens, documents, r.output, seconds,
      seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0, source->describe());
  return kExitOk;
}

}  // namespace titan

#include "app/tokenize.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <ostream>

#include "config/loader.h"
#include "data/sources.h"
#include "data/text_encoding.h"
#include "model/model_args.h"
#include "models/registry.h"
#include "util/error.h"
#include "util/files.h"
#include "util/stop_signal.h"
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

// Whether `path` (a file, or a folder searched below) holds the file `st` describes.
bool holds_file(const std::string& path, const struct stat& st) {
  namespace fs = std::filesystem;
  auto same = [&](const fs::path& p) {
    struct stat other {};
    return ::stat(p.c_str(), &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
  };
  std::error_code ec;
  if (path.empty() || same(path)) return !path.empty();
  if (!fs::is_directory(path, ec)) return false;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && same(it->path())) return true;
  }
  return false;
}

// OUT is a new regular file, or with --force an existing one that is none of the command's
// inputs (the dataset's files, the tokenizer's folder): it is replaced only once it is complete.
void check_tokenize_output(const TokenizeRequest& r, const Config& config) {
  struct stat st {};
  const bool exists = ::lstat(r.output.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    throw FileRefused(r.output, "is " + file_type_name(st.st_mode) + ", not a regular file",
                      "tokenize writes a regular .bin file; choose another -o");
  }
  if (exists && !r.force)
    throw ConfigError(r.output, "exists", "remove it, choose another -o, or pass --force");
  if (!exists) return;
  const std::pair<const char*, std::string> inputs[] = {
      {"training.dataset_path", config.training.dataset_path},
      {"model.hf_assets_path", config.model.hf_assets_path}};
  for (const auto& [key, path] : inputs) {
    if (holds_file(path, st)) {
      throw ConfigError(r.output,
                        fmt::format("is an input of the command ({} = \"{}\")", key, path),
                        "write the token stream to another -o; --force replaces outputs only");
    }
  }
}

// Writes every document's ids to `tmp`; false, with `tmp` removed, when a SIGTERM or SIGINT
// arrives first (checked between documents).
bool write_token_stream(TokenSource& source, const std::string& tmp, std::ostream& progress,
                        uint64_t& documents_done, uint64_t& tokens) {
  HashedFileWriter writer(tmp);
  const uint64_t documents = source.num_documents();
  const auto start = SteadyClock::now();
  double next_report = 2.0;
  for (documents_done = 0; documents_done < documents; ++documents_done) {
    if (pending_stop_signal() != 0) return false;  // the writer removes tmp
    const std::vector<int32_t> ids = source.document(documents_done);
    // int32 ids are non-negative: their bytes are those of uint32 on a little-endian machine.
    writer.write(ids.data(), ids.size() * sizeof(int32_t));
    tokens += ids.size();
    if (seconds_since(start) >= next_report) {
      progress << fmt::format("[titan] tokenize: {}/{} documents, {} tokens, {:.1f} s\n",
                              documents_done + 1, documents, tokens, seconds_since(start))
               << std::flush;
      next_report += 2.0;
    }
  }
  writer.finish();
  return true;
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
  check_tokenize_output(r, config);
  const int64_t vocab_size = model_args_for(config).vocab_size;
  const TextEncoding text = text_encoding_for(config, vocab_size);
  for (const auto& note : text.notes) progress << "[titan] " << note << "\n";
  const auto source = make_token_source(training_dataset(config.training), 0,
                                        config.training.seq_len + 1, vocab_size, text.encoder);
  const auto start = SteadyClock::now();
  const std::string tmp = r.output + ".tmp";
  std::remove(tmp.c_str());
  uint64_t documents = 0, tokens = 0;
  if (!write_token_stream(*source, tmp, progress, documents, tokens)) {
    const int signal = pending_stop_signal();
    throw StoppedBySignal(
        signal,
        fmt::format("tokenize stopped by {} after {} of {} documents; {} is not written",
                    stop_signal_name(signal), documents, source->num_documents(), r.output));
  }
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

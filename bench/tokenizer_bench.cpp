// titan's tokenizer on a corpus, single-threaded: the figures scripts/bench_tokenizer.sh sets
// beside Hugging Face tokenizers and tiktoken (test/oracles/bench_oracles.js).
//
//   titan-bench-tokenizer FOLDER_OR_RANK_FILE CORPUS ROUNDS [IDS]
// FOLDER: a model.hf_assets_path folder (load_tokenizer); a file: a tiktoken rank file without
// special tokens (cl100k_base). Each round prints "titan cold|warm S seconds N tokens" for one
// encode of the whole corpus (read once, as bytes; "cold": the first, with empty caches). With
// IDS (uint32 little-endian), the first round's ids are compared with it and the first
// difference is printed (exit 1).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "tokenizer/tiktoken_file.h"
#include "tokenizer/tokenizer_loader.h"
#include "util/error.h"
#include "util/files.h"

using namespace titan;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: titan-bench-tokenizer FOLDER_OR_RANK_FILE CORPUS ROUNDS [IDS]\n";
    return 2;
  }
  try {
    const std::string source = argv[1];
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<Tokenizer> tok = std::filesystem::is_directory(source)
                                         ? load_tokenizer(source)
                                         : load_tiktoken_file(source, false);
    fmt::print("load {:.3f} seconds: {}\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               tok->describe());
    const std::string corpus = read_file(argv[2], uint64_t(1) << 32);
    const int rounds = std::atoi(argv[3]);
    for (int r = 0; r < rounds; ++r) {
      start = std::chrono::steady_clock::now();
      const std::vector<int32_t> ids = tok->encode(corpus);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print("titan {} {:.4f} seconds {} tokens\n", r == 0 ? "cold" : "warm", s, ids.size());
      if (r == 0 && argc > 4) {
        const std::string want = read_file(argv[4], uint64_t(1) << 32);
        const size_t n = want.size() / 4;
        size_t i = 0;
        for (; i < n && i < ids.size(); ++i) {
          uint32_t w;
          std::memcpy(&w, want.data() + 4 * i, 4);
          if (uint32_t(ids[i]) != w) break;
        }
        if (i == n && n == ids.size()) {
          fmt::print("ids equal ({} tokens)\n", n);
        } else {
          fmt::print("ids differ at token {} of {} (titan has {})\n", i, n, ids.size());
          for (size_t k = i >= 5 ? i - 5 : 0; k < i + 8; ++k) {
            uint32_t w = 0;
            if (k < n) std::memcpy(&w, want.data() + 4 * k, 4);
            fmt::print("  {:>8} want {:>7} titan {:>7}  {:?}\n", k, w, k < ids.size() ? ids[k] : -1,
                       k < ids.size() ? tok->decode({ids[k]}) : std::string());
          }
          return 1;
        }
      }
    }
  } catch (const ConfigError& e) {
    std::cerr << "titan-bench-tokenizer: " << e.where() << ": " << e.message() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "titan-bench-tokenizer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

#include "llama3/flavors.h"

#include <stdexcept>

namespace titan::llama3 {

namespace {
struct LlamaFlavor {
  const char* name;
  int64_t dim, n_layers, n_heads, n_kv_heads;  // n_kv_heads 0: n_heads
  int64_t vocab_size, multiple_of;
  double ffn_dim_multiplier;  // 0: none
};
// The vocabulary is Llama 3's 128,256 unless given; multiple_of 256 unless given.
const LlamaFlavor kFlavors[] = {
    {"tiny", 64, 2, 4, 2, 512, 64, 0},  // not in torchtitan: small, and exercises GQA
    {"debugmodel", 256, 6, 16, 0, 2048, 256, 0},
    {"debugmodel_wide", 1024, 8, 16, 0, 2048, 256, 0},  // not in torchtitan: the benchmark's
    {"1B", 2048, 16, 32, 8, 128256, 256, 1.5},  // Llama 3.2 1B (torchtitan leaves it untied)
    {"8B", 4096, 32, 32, 8, 128256, 1024, 1.3},
    {"70B", 8192, 80, 64, 8, 128256, 4096, 1.3},
    {"405B", 16384, 126, 128, 8, 128256, 4096, 1.2},
};
}  // namespace

const std::vector<std::string>& flavors() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const LlamaFlavor& f : kFlavors) out.push_back(f.name);
    return out;
  }();
  return names;
}

ModelArgs flavor_args(const std::string& flavor) {
  for (const LlamaFlavor& f : kFlavors) {
    if (flavor != f.name) continue;
    ModelArgs a;
    a.family = "llama3";
    a.dim = f.dim, a.n_layers = f.n_layers, a.n_heads = f.n_heads;
    if (f.n_kv_heads != 0) a.n_kv_heads = f.n_kv_heads;
    a.vocab_size = f.vocab_size, a.multiple_of = f.multiple_of;
    if (f.ffn_dim_multiplier != 0) a.ffn_dim_multiplier = f.ffn_dim_multiplier;
    return a;
  }
  throw std::invalid_argument("no llama3 flavor \"" + flavor + "\"");
}

}  // namespace titan::llama3

#include "deepseek_v3/flavors.h"

#include <limits>
#include <stdexcept>

namespace titan::deepseek_v3 {
namespace {

struct Flavor {
  const char* name;
  int64_t vocab_size, dim, inter_dim, moe_inter_dim, n_layers, n_dense_layers, n_heads;
  int64_t num_experts, num_shared_experts, top_k, num_expert_groups, num_limited_groups;
  const char* score_func;
  bool route_norm;
  double route_scale;
  int64_t q_lora_rank;
  double mscale;
};

// kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128 and the YaRN
// defaults (original_seq_len 4096, rope_theta 10000, rope_factor 40, beta_fast 32, beta_slow 1)
// for all but tiny: titan-train's, small, with YaRN at a seq_len above 8, node-limited
// routing and a shared expert. (16B, 236B and 671B attend within documents in torchtitan:
// config/model_catalog.cpp says so at start-up.)
const Flavor kFlavors[] = {
    {"tiny", 512, 64, 128, 32, 2, 1, 4, 8, 1, 2, 4, 2, "softmax", false, 1.0, 0, 0.7},
    {"debugmodel", 2048, 256, 1024, 256, 6, 1, 16, 8, 2, 3, 0, 0, "softmax", false, 1.0, 0, 0.7},
    {"16B", 102400, 2048, 10944, 1408, 27, 1, 16, 64, 2, 6, 0, 0, "softmax", false, 1.0, 0, 0.7},
    {"236B", 102400, 5120, 12288, 1536, 60, 1, 128, 160, 2, 6, 8, 3, "softmax", false, 16.0, 1536,
     1.0},
    {"671B", 129280, 7168, 18432, 2048, 61, 3, 128, 256, 1, 8, 8, 4, "sigmoid", true, 2.5, 1536,
     1.0},
};

const Flavor& find(const std::string& name) {
  for (const Flavor& f : kFlavors) {
    if (name == f.name) return f;
  }
  throw std::invalid_argument("no deepseek_v3 flavor \"" + name + "\"");
}

}  // namespace

const std::vector<std::string>& flavors() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Flavor& f : kFlavors) out.push_back(f.name);
    return out;
  }();
  return names;
}

ModelArgs flavor_args(const std::string& flavor) {
  const Flavor& f = find(flavor);
  ModelArgs a;
  a.family = "deepseek_v3";
  a.vocab_size = f.vocab_size, a.dim = f.dim, a.n_layers = f.n_layers, a.n_heads = f.n_heads;
  a.hidden_dim = f.inter_dim;
  a.moe_inter_dim = f.moe_inter_dim;
  a.n_dense_layers = f.n_dense_layers;
  a.norm_eps = 1e-5;
  a.final_norm_eps = std::numeric_limits<float>::epsilon();  // nn.RMSNorm(dim): eps=None
  a.rope_theta = 10000.0;
  a.rope_scaling.enabled = false;
  a.max_seq_len = 4096 * 4;
  MlaArgs mla;
  mla.q_lora_rank = f.q_lora_rank;
  mla.mscale = f.mscale;
  if (flavor == "tiny") {
    mla.kv_lora_rank = 32, mla.qk_nope_head_dim = 16, mla.qk_rope_head_dim = 8;
    mla.v_head_dim = 16, mla.original_seq_len = 8;
  }
  a.mla = mla;
  MoEArgs m;
  m.num_experts = f.num_experts;
  m.num_shared_experts = f.num_shared_experts;
  m.top_k = f.top_k;
  if (f.num_expert_groups > 0) {
    m.num_expert_groups = f.num_expert_groups;
    m.num_limited_groups = f.num_limited_groups;
  }
  m.score_func = f.score_func;
  m.route_norm = f.route_norm;
  m.route_scale = f.route_scale;
  m.score_before_experts = false;
  m.update_expert_bias = true;  // torchtitan's deepseek_v3 registers the load-balancing hook
  a.moe = m;
  return a;
}

}  // namespace titan::deepseek_v3

#include "models/registry.h"

#include <fmt/format.h>

#include <functional>
#include <stdexcept>

#include "deepseek_v3/deepseek_v3.h"
#include "deepseek_v3/flavors.h"
#include "llama3/flavors.h"
#include "llama3/transformer.h"
#include "moe/moe.h"
#include "qwen3/qwen3.h"
#include "util/error.h"

namespace titan {

namespace {
using ModelBuilder = std::function<Model(const ModelArgs&, const ParamMemory&)>;

struct Family {
  const char* name;
  std::function<const std::vector<std::string>&()> flavors;
  std::function<ModelArgs(const std::string&)> flavor_args;
  ModelBuilder build;
};

template <class Impl>
Model make_model(const ModelArgs& args, const ParamMemory& memory) {
  return Model(std::shared_ptr<ModelImpl>(std::make_shared<Impl>(args, memory)));
}

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {"llama3", llama3::flavors, llama3::flavor_args, make_model<TransformerImpl>},
      {"qwen3", qwen3::flavors, qwen3::flavor_args, make_model<qwen3::Qwen3Impl>},
      {"deepseek_v3", deepseek_v3::flavors, deepseek_v3::flavor_args,
       make_model<deepseek_v3::DeepSeekV3Impl>},
  };
  return kFamilies;
}

const Family& family_named(const std::string& name) {
  for (const Family& f : families()) {
    if (name == f.name) return f;
  }
  std::string known;
  for (const std::string& n : model_families()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("no model family \"" + name + "\" (registered: " + known + ")");
}
}  // namespace

std::vector<std::string> model_families() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.push_back(f.name);
  return names;
}

std::vector<std::string> family_flavors(const std::string& family) {
  return family_named(family).flavors();
}

ModelArgs flavor_args(const std::string& family, const std::string& flavor) {
  return family_named(family).flavor_args(flavor);
}

Model build_model(const ModelArgs& args, const ParamMemory& memory) {
  return family_named(args.family).build(args, memory);
}

ModelArgs model_args_for(const Config& config) {
  ModelArgs args;
  try {
    args = flavor_args(config.model.name, config.model.flavor);
  } catch (const std::invalid_argument& e) {  // a config read without validate(): a saved one
    throw ConfigError("model.flavor", e.what(), "name a family and flavor titan-train builds");
  }
  args.max_seq_len = config.training.seq_len;
  args.dropout = config.model.dropout;
  if (args.moe) {
    try {
      moe::check_moe_args(*args.moe);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("model.flavor",
                        fmt::format("{} {}'s MoE layer cannot route: {}", config.model.name,
                                    config.model.flavor, e.what()),
                        "pick another flavor");
    }
    args.moe->force_load_balance = config.debug.moe_force_load_balance;
    args.moe->bf16_experts = config.debug.moe_bf16_experts;
    // torchtitan v0.2.2 registers its load-balancing hook for deepseek_v3, never for qwen3.
    args.moe->update_expert_bias = args.family != "qwen3" || config.debug.qwen3_moe_load_balancing;
  }
  return args;
}

}  // namespace titan

#include "models/registry.h"

#include <functional>
#include <stdexcept>

#include "llama3/transformer.h"
#include "qwen3/qwen3.h"

namespace titan {

namespace {
using ModelBuilder = std::function<Model(const ModelArgs&, const ParamMemory&)>;

struct Family {
  const char* name;
  ModelBuilder build;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {"llama3",
       [](const ModelArgs& a, const ParamMemory& m) {
         return Model(std::shared_ptr<ModelImpl>(std::make_shared<TransformerImpl>(a, m)));
       }},
      {"qwen3",
       [](const ModelArgs& a, const ParamMemory& m) {
         return Model(std::shared_ptr<ModelImpl>(std::make_shared<qwen3::Qwen3Impl>(a, m)));
       }},
  };
  return kFamilies;
}
}  // namespace

std::vector<std::string> model_families() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.push_back(f.name);
  return names;
}

Model build_model(const ModelArgs& args, const ParamMemory& memory) {
  for (const Family& f : families()) {
    if (args.family == f.name) return f.build(args, memory);
  }
  std::string known;
  for (const std::string& name : model_families()) known += (known.empty() ? "" : ", ") + name;
  throw std::invalid_argument("no model family \"" + args.family + "\" (registered: " + known +
                              ")");
}

}  // namespace titan

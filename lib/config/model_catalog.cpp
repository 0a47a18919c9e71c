#include "config/model_catalog.h"

namespace titan {
namespace {

constexpr const char* kNoFlex = "needs FlexAttention, which titan-train does not have";
constexpr const char* kNoVarlen =
    "needs variable-length attention, which titan-train does not have";
constexpr const char* kWithinDocuments =
    "attends within documents in torchtitan (FlexAttention, block_causal masks); titan-train "
    "attends causally over the whole sequence, as torchtitan's debugmodel does";

CatalogEntry offered(const char* name) { return {name, "", ""}; }
CatalogEntry offered_moe(const char* name) { return {name, "", "", true}; }
CatalogEntry with_note(CatalogEntry entry, const char* note) {
  entry.note = note;
  return entry;
}

std::vector<FamilyCatalog> build_catalog() {
  FamilyCatalog llama3{offered("llama3"),
                       {offered("tiny"),
                        offered("debugmodel"),
                        offered("debugmodel_wide"),
                        offered("1B"),
                        offered("8B"),
                        offered("70B"),
                        offered("405B"),
                        {"debugmodel_flex_attn", kNoFlex,
                         "use flavor = \"debugmodel\": the same model with causal attention over "
                         "the whole sequence"},
                        {"debugmodel_varlen_attn", kNoVarlen,
                         "use flavor = \"debugmodel\": the same model with causal attention over "
                         "the whole sequence"},
                        {"8B_flex", kNoFlex,
                         "use flavor = \"8B\": the same model with causal attention over the whole "
                         "sequence"},
                        {"8B_varlen", kNoVarlen,
                         "use flavor = \"8B\": the same model with causal attention over the "
                         "whole sequence"}}};
  FamilyCatalog qwen3{
      offered("qwen3"),
      {offered("tiny"), offered("debugmodel"), offered("0.6B"), offered("1.7B"), offered("4B"),
       offered("8B"), offered("14B"), offered("32B"), offered_moe("tiny_moe"),
       offered_moe("debugmodel_moe"), offered_moe("30B-A3B"), offered_moe("235B-A22B")}};
  FamilyCatalog deepseek_v3{offered("deepseek_v3"),
                            {offered_moe("tiny"),
                             offered_moe("debugmodel"),
                             {"debugmodel_flex_attn", kNoFlex,
                              "use flavor = \"debugmodel\": the same model with causal attention "
                              "over the whole sequence"},
                             with_note(offered_moe("16B"), kWithinDocuments),
                             with_note(offered_moe("236B"), kWithinDocuments),
                             with_note(offered_moe("671B"), kWithinDocuments)}};
  return {llama3, qwen3, deepseek_v3};
}

}  // namespace

const std::vector<FamilyCatalog>& model_catalog() {
  static const std::vector<FamilyCatalog> catalog = build_catalog();
  return catalog;
}

const FamilyCatalog* find_family(const std::string& name) {
  for (const FamilyCatalog& f : model_catalog()) {
    if (f.family.name == name) return &f;
  }
  return nullptr;
}

const CatalogEntry* find_flavor(const std::string& family, const std::string& flavor) {
  const FamilyCatalog* f = find_family(family);
  if (f == nullptr) return nullptr;
  for (const CatalogEntry& e : f->flavors) {
    if (e.name == flavor) return &e;
  }
  return nullptr;
}

std::vector<std::string> offered_flavors(const FamilyCatalog& family) {
  std::vector<std::string> names;
  for (const CatalogEntry& e : family.flavors) {
    if (!e.refused()) names.push_back(e.name);
  }
  return names;
}

}  // namespace titan

// The model families and flavors a config can name (model.name, model.flavor): the closed set
// validate() checks at the config boundary, with torchtitan v0.2.2's names.
//
// Each family's library maps its flavors to shapes (models/registry.h); test_models checks that
// every flavor offered here builds there and that the two lists agree. A refused entry is a name
// torchtitan has and titan-train cannot train yet: validate() stops on it with `why` and `hint`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace titan {

struct CatalogEntry {
  CatalogEntry(std::string name_, std::string why_ = "", std::string hint_ = "", bool moe = false)
      : name(std::move(name_)),
        why(std::move(why_)),
        hint(std::move(hint_)),
        mixture_of_experts(moe) {}
  std::string name;
  std::string why;                  // "": offered; else why it is refused
  std::string hint;                 // what to use instead (refused entries)
  bool mixture_of_experts = false;  // a flavor with MoE layers
  // An offered flavor computed otherwise than torchtitan computes it: said at start-up.
  std::string note;
  bool refused() const { return !why.empty(); }
};

struct FamilyCatalog {
  CatalogEntry family;
  std::vector<CatalogEntry> flavors;  // empty for a refused family
};

// Every family, in the order --help lists them.
const std::vector<FamilyCatalog>& model_catalog();

// The catalog of model.name `name`, or nullptr.
const FamilyCatalog* find_family(const std::string& name);

// The catalog entry of `family`'s `flavor`, or nullptr.
const CatalogEntry* find_flavor(const std::string& family, const std::string& flavor);

// The offered (not refused) flavor names of `family`, in catalog order.
std::vector<std::string> offered_flavors(const FamilyCatalog& family);

}  // namespace titan

// The field table: the single description of every config key (section, name, type, help,
// allowed values, numeric bounds) used by the TOML reader, the CLI parser, --help, --print-config
// and the validator.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace titan {

// An enum-valued field, type-erased: its value as an index into `names` (see config/enums.h).
struct EnumTarget {
  std::function<size_t()> get;
  std::function<void(size_t)> set;
  const std::vector<std::string>* names = nullptr;
};

// A std::vector<int64_t> is a list of integers: a TOML array, "1,2,3" on the command line; the
// bounds apply to each element.
// A std::vector<std::string> is a list of strings: a TOML array of strings, "a,b" on the command
// line. A list of string lists (torchtitan's module_fqns_per_model_part) is "a,b;c" there.
using StringLists = std::vector<std::vector<std::string>>;
using FieldTarget = std::variant<bool*, int64_t*, double*, std::string*, std::optional<int64_t>*,
                                 std::optional<double>*, EnumTarget, std::vector<int64_t>*,
                                 std::vector<std::string>*, StringLists*>;

// What a key does here (docs/configuration.md has the table):
//   kWorks     as in torchtitan (or titan-train's own key);
//   kNoEffect  accepted, no effect on the math: a performance knob without a C++ counterpart, or
//              a setting read only by a feature that is refused; a non-default value is named
//              in the start-up log with `note` (why);
//   kRefused   any value but the default would change the model, its layout or its numerics in
//              a way titan-train does not implement: exit 2 before any output, naming the key,
//              the value and `note` (what to use instead).
enum class KeyKind { kWorks, kNoEffect, kRefused };

struct FieldSpec {
  std::string section;
  std::string key;
  std::string help;
  FieldTarget target;                // where the value lives in the Config it was built for
  std::vector<std::string> choices;  // non-empty: the only allowed values (an enum's names)
  std::optional<double> min;         // numeric lower bound
  bool min_exclusive = false;        // true: value must be > min, else >= min
  std::optional<double> max;         // numeric upper bound
  bool max_exclusive = false;        // true: value must be < max, else <= max
  // Numbers must also be finite (no inf, no nan) for every float key.
  // True for keys that cannot change what a run computes (where outputs go, how often to log)
  // or that fingerprint.log records separately in resolved form (device, threads): the config
  // hash in fingerprint.log leaves them out.
  bool excluded_from_hash = false;
  // Keys added after runs were fingerprinted enter the hash only at a non-default value, so that
  // a run that leaves them alone keeps its config_hash.
  bool hashed_when_changed = false;
  // True for keys each process may set for itself (threads, timeouts, how the console looks):
  // they change neither a rank's collectives nor the files it writes. Every other key must agree
  // between the ranks of a run (lib/train/rank_agreement.h).
  bool may_differ_between_ranks = false;
  KeyKind kind = KeyKind::kWorks;
  std::string note;  // kNoEffect: why; kRefused: what to use instead
  // The Config's toml_locations entry for this key: set by the TOML reader, cleared when a flag
  // overrides the value.
  std::string* toml_location = nullptr;

  std::string name() const { return section + "." + key; }
  // "bool", "integer", "float", "string", "integer (optional)", ...
  std::string type_name() const;
  // The value as TOML source text ("true", "8", "0.0008", "\"a\""), or "" for an unset optional.
  std::string value_as_toml() const;
  bool has_value() const;
};

// "works", "no effect", "refused".
const char* to_string(KeyKind kind);

// Every field of `config`, in section order, each pointing into `config`.
// Requires: `config` outlives the returned specs.
std::vector<FieldSpec> config_fields(Config& config);

// A key whose value differs between two configs.
struct ConfigKeyDifference {
  std::string key, a, b;  // TOML text; "unset" for an unset optional
  bool hashed = true;     // part of the config hash (false: outputs, logging, threads, ...)
  // Must be equal on every rank: neither FieldSpec::may_differ_between_ranks nor a key without
  // effect.
  bool must_agree_between_ranks = true;
};

// The keys whose values differ between `a` and `b`, in section order.
std::vector<ConfigKeyDifference> config_differences(Config a, Config b);

// For an unknown "section.key" (or a bare key): the same key in another section
// ("--steps" -> "training.steps"), else the closest known name (a plausible typo) among the fields
// and `other_names`, else "".
std::string suggest_field_name(const std::string& name, const std::vector<FieldSpec>& fields,
                               const std::vector<std::string>& other_names = {});

// The section names, in the order they are printed ("training.dataloader" is a section of its
// own, printed as a TOML table of its own).
std::vector<std::string> config_sections();

// The value of `spec` in `defaults` (a default-constructed Config's field table) as TOML text.
std::string default_value_of(const FieldSpec& spec);

// Quotes and escapes `s` as a TOML basic string.
std::string toml_quote(const std::string& s);

}  // namespace titan

// Building the field table (internal to lib/config): one builder per property of a key, and the
// table's parts, one function per group of sections.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/limits.h"
#include "config/schema.h"

namespace titan::schema {

// Why the data loader's worker and prefetch keys have no effect here.
inline constexpr const char* kNoWorkers =
    "titan-train's loader reads in the training thread, with no worker processes";

inline FieldSpec field(const char* section, const char* key, FieldTarget target, const char* help) {
  FieldSpec spec;
  spec.section = section;
  spec.key = key;
  spec.help = help;
  spec.target = std::move(target);
  return spec;
}

inline FieldSpec with_choices(FieldSpec spec, std::vector<std::string> choices) {
  spec.choices = std::move(choices);
  return spec;
}

template <class E>
FieldSpec enum_field(const char* section, const char* key, E* target, const char* help) {
  EnumTarget t;
  t.get = [target] { return static_cast<size_t>(*target); };
  t.set = [target](size_t index) { *target = static_cast<E>(index); };
  t.names = &enum_names<E>();
  return with_choices(field(section, key, std::move(t), help), enum_names<E>());
}

inline FieldSpec not_hashed(FieldSpec spec) {
  spec.excluded_from_hash = true;
  return spec;
}

// A key each rank may set for itself (FieldSpec::may_differ_between_ranks).
inline FieldSpec rank_local(FieldSpec spec) {
  spec.may_differ_between_ranks = true;
  return spec;
}

inline FieldSpec hashed_when_changed(FieldSpec spec) {
  spec.hashed_when_changed = true;
  return spec;
}

// Accepted, no effect on the math: `why` is logged when the value is not the default.
inline FieldSpec no_effect(FieldSpec spec, const char* why) {
  spec.kind = KeyKind::kNoEffect;
  spec.note = why;
  spec.excluded_from_hash = true;
  return spec;
}

// Refused at any value but the default: `instead` says what to use. Left out of the hash: a run
// has it at its default.
inline FieldSpec refused(FieldSpec spec, const char* instead) {
  spec.kind = KeyKind::kRefused;
  spec.note = instead;
  spec.excluded_from_hash = true;
  return spec;
}

// The same, for a key that was in the config hash before it was classified (kept there, so
// that config hashes do not change).
inline FieldSpec refused_hashed(FieldSpec spec, const char* instead) {
  spec.kind = KeyKind::kRefused;
  spec.note = instead;
  return spec;
}

inline FieldSpec at_least(FieldSpec spec, double min, std::optional<double> max = std::nullopt) {
  spec.min = min;
  spec.max = max;
  return spec;
}

inline FieldSpec above(FieldSpec spec, double min, std::optional<double> max = std::nullopt) {
  spec.min = min;
  spec.min_exclusive = true;
  spec.max = max;
  return spec;
}

// min <= value < max.
inline FieldSpec at_least_below(FieldSpec spec, double min, double max) {
  spec = at_least(std::move(spec), min, max);
  spec.max_exclusive = true;
  return spec;
}

constexpr double kMaxSteps = static_cast<double>(limits::kMaxSteps);
constexpr double kMaxDegree = static_cast<double>(limits::kMaxWorldSize);

// The table's parts, in the order config_fields concatenates them (the config hash reads the
// hashed keys in this order: new keys go where they keep the old ones' order).
void add_core_fields(Config& c, std::vector<FieldSpec>& out);        // job .. metrics
void add_run_fields(Config& c, std::vector<FieldSpec>& out);         // parallelism .. debug
void add_torchtitan_fields(Config& c, std::vector<FieldSpec>& out);  // profiling .. experimental

}  // namespace titan::schema

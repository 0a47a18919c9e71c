#include "config/schema.h"

#include <fmt/format.h>

#include <cmath>

#include "config/limits.h"
#include "config/schema_build.h"
#include "util/strings.h"

namespace titan {
namespace {

std::string format_double(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  // fmt's default is the shortest text that reads back to the same double.
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keep it a TOML float
  return s;
}

}  // namespace

std::string suggest_field_name(const std::string& name, const std::vector<FieldSpec>& fields,
                               const std::vector<std::string>& other_names) {
  const auto dot = name.rfind('.');
  const std::string key = dot == std::string::npos ? name : name.substr(dot + 1);
  for (const auto& f : fields) {
    if (f.key == key && f.name() != name) return f.name();
  }
  std::vector<std::string> names = other_names;
  for (const auto& f : fields) names.push_back(f.name());
  return closest_match(name, names);
}

std::vector<std::string> config_sections() {
  // torchtitan v0.2.2's order.
  return {"job",
          "profiling",
          "metrics",
          "model",
          "optimizer",
          "lr_scheduler",
          "training",
          "training.dataloader",
          "parallelism",
          "checkpoint",
          "activation_checkpoint",
          "compile",
          "quantize.linear.float8",
          "quantize.linear.mx",
          "quantize.grouped_mm.float8",
          "quantize.grouped_mm.mx",
          "comm",
          "memory_estimation",
          "fault_tolerance",
          "experimental",
          "validation",
          "validation.dataloader",
          "debug"};
}

const char* to_string(KeyKind kind) {
  switch (kind) {
    case KeyKind::kWorks:
      return "works";
    case KeyKind::kNoEffect:
      return "no effect";
    case KeyKind::kRefused:
      break;
  }
  return "refused";
}

std::vector<FieldSpec> config_fields(Config& c) {
  std::vector<FieldSpec> fields;
  schema::add_core_fields(c, fields);
  schema::add_run_fields(c, fields);
  schema::add_torchtitan_fields(c, fields);
  for (auto& f : fields) f.toml_location = &c.toml_locations[f.name()];
  return fields;
}

std::string default_value_of(const FieldSpec& spec) {
  static Config defaults;
  static const std::vector<FieldSpec> fields = config_fields(defaults);
  for (const auto& f : fields) {
    if (f.name() == spec.name()) return f.has_value() ? f.value_as_toml() : "";
  }
  return "";
}

std::string FieldSpec::type_name() const {
  struct Visitor {
    std::string operator()(bool*) const { return "bool"; }
    std::string operator()(int64_t*) const { return "integer"; }
    std::string operator()(double*) const { return "float"; }
    std::string operator()(std::string*) const { return "string"; }
    std::string operator()(std::optional<int64_t>*) const { return "integer"; }
    std::string operator()(std::optional<double>*) const { return "float"; }
    std::string operator()(const EnumTarget&) const { return "string"; }
    std::string operator()(std::vector<int64_t>*) const { return "integer list"; }
    std::string operator()(std::vector<std::string>*) const { return "string list"; }
    std::string operator()(StringLists*) const { return "list of string lists"; }
  };
  return std::visit(Visitor{}, target);
}

bool FieldSpec::has_value() const {
  if (auto p = std::get_if<std::optional<int64_t>*>(&target)) return (*p)->has_value();
  if (auto p = std::get_if<std::optional<double>*>(&target)) return (*p)->has_value();
  return true;
}

std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          out += fmt::format("\\u{:04X}", ch);
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

std::string FieldSpec::value_as_toml() const {
  struct Visitor {
    std::string operator()(bool* v) const { return *v ? "true" : "false"; }
    std::string operator()(int64_t* v) const { return std::to_string(*v); }
    std::string operator()(double* v) const { return format_double(*v); }
    std::string operator()(std::string* v) const { return toml_quote(*v); }
    std::string operator()(std::optional<int64_t>* v) const {
      return v->has_value() ? std::to_string(**v) : "";
    }
    std::string operator()(std::optional<double>* v) const {
      return v->has_value() ? format_double(**v) : "";
    }
    std::string operator()(const EnumTarget& e) const { return toml_quote((*e.names)[e.get()]); }
    std::string operator()(std::vector<int64_t>* v) const {
      std::string out = "[";
      for (size_t i = 0; i < v->size(); ++i) out += (i ? ", " : "") + std::to_string((*v)[i]);
      return out + "]";
    }
    std::string operator()(std::vector<std::string>* v) const { return string_list(*v); }
    std::string operator()(StringLists* v) const {
      std::string out = "[";
      for (size_t i = 0; i < v->size(); ++i) out += (i ? ", " : "") + string_list((*v)[i]);
      return out + "]";
    }
    static std::string string_list(const std::vector<std::string>& items) {
      std::string out = "[";
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + toml_quote(items[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, target);
}

std::vector<ConfigKeyDifference> config_differences(Config a, Config b) {
  auto fa = config_fields(a), fb = config_fields(b);
  std::vector<ConfigKeyDifference> out;
  for (size_t i = 0; i < fa.size(); ++i) {
    auto va = fa[i].has_value() ? fa[i].value_as_toml() : "unset";
    auto vb = fb[i].has_value() ? fb[i].value_as_toml() : "unset";
    if (va == vb) continue;
    const bool must_agree = !fa[i].may_differ_between_ranks && fa[i].kind != KeyKind::kNoEffect;
    out.push_back({fa[i].name(), va, vb, !fa[i].excluded_from_hash, must_agree});
  }
  return out;
}

}  // namespace titan

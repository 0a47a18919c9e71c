#include "checkpoint/model_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <torch/torch.h>

#include <cstdlib>
#include <set>

#include "checkpoint/snapshot.h"
#include "util/error.h"

namespace titan {
namespace {

std::string shape_text(at::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

std::string exact(double x) { return fmt::format("{:a}", x); }

// Metadata keys and their values, read back exactly.
class MetadataReader {
 public:
  MetadataReader(const SafetensorsMetadata& m, std::string source)
      : m_(m), source_(std::move(source)) {}

  const std::string& text(const std::string& key) const {
    auto it = m_.find(key);
    if (it == m_.end()) fail(fmt::format("metadata \"{}\" is missing", key));
    return it->second;
  }
  double number(const std::string& key) const {
    const std::string& t = text(key);
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0')
      fail(fmt::format("metadata \"{}\" = \"{}\" is not a number", key, t));
    return v;
  }
  int64_t integer(const std::string& key) const {
    const double v = number(key);
    if (v != static_cast<double>(static_cast<int64_t>(v)) || v < 0) {
      fail(fmt::format("metadata \"{}\" is not a non-negative integer", key));
    }
    return static_cast<int64_t>(v);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw RuntimeFailure(fmt::format("{}: {}", source_, what),
                         "the checkpoint does not fit this optimizer; load another one "
                         "(checkpoint.load_step)");
  }

 private:
  const SafetensorsMetadata& m_;
  std::string source_;
};

// The optimizer file's tensors per parameter, "<name>.<field>"; the last is amsgrad's only.
constexpr const char* kAdamWTensors[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};

}  // namespace

std::vector<NamedTensor> named_parameters(const torch::nn::Module& module) {
  std::vector<NamedTensor> out;
  for (const auto& item : module.named_parameters()) out.push_back({item.key(), item.value()});
  return out;
}

CheckpointContents full_checkpoint(const torch::nn::Module& module,
                                   const torch::optim::AdamW& optimizer, const TrainState& state) {
  const Snapshot s = take_snapshot(module, optimizer, state, SnapshotCopy::kShare);
  CheckpointContents c;
  c.step = state.step;
  c.state = state;
  c.model = named_parameters(module);
  TORCH_CHECK(s.optimizer.size() == c.model.size(),
              "the optimizer does not hold the module's parameters");
  std::vector<size_t> group_sizes;
  for (const auto& group : optimizer.param_groups()) group_sizes.push_back(group.params().size());
  std::vector<NamedStep> steps;
  for (size_t i = 0; i < s.optimizer.size(); ++i) {
    const auto& state_i = s.optimizer[i];
    if (!state_i) continue;
    const std::string& name = c.model[i].name;
    steps.push_back({name, state_i->step});
    c.optimizer.push_back({name + ".exp_avg", state_i->exp_avg});
    c.optimizer.push_back({name + ".exp_avg_sq", state_i->exp_avg_sq});
    if (state_i->max_exp_avg_sq.defined()) {
      c.optimizer.push_back({name + ".max_exp_avg_sq", state_i->max_exp_avg_sq});
    }
  }
  c.optimizer_metadata = adamw_metadata(s.groups, group_sizes, steps);
  return c;
}

SafetensorsMetadata adamw_metadata(const std::vector<AdamWGroupSnapshot>& groups,
                                   const std::vector<size_t>& group_sizes,
                                   const std::vector<NamedStep>& steps) {
  SafetensorsMetadata meta;
  meta["format"] = "titan-train adamw 1";
  meta["groups"] = std::to_string(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    const std::string prefix = fmt::format("group.{}.", g);
    meta[prefix + "lr"] = exact(group.lr);
    meta[prefix + "beta1"] = exact(group.beta1);
    meta[prefix + "beta2"] = exact(group.beta2);
    meta[prefix + "eps"] = exact(group.eps);
    meta[prefix + "weight_decay"] = exact(group.weight_decay);
    meta[prefix + "amsgrad"] = group.amsgrad ? "true" : "false";
    meta[prefix + "params"] = std::to_string(group_sizes.at(g));
  }
  for (const auto& s : steps) meta[s.name + ".step"] = std::to_string(s.step);
  return meta;
}

at::ScalarType export_scalar_type(ExportDtype dtype) {
  switch (dtype) {
    case ExportDtype::kFloat32:
      return at::kFloat;
    case ExportDtype::kBfloat16:
      return at::kBFloat16;
    case ExportDtype::kFloat16:
      return at::kHalf;
  }
  throw std::logic_error("unhandled ExportDtype");
}

std::vector<NamedTensor> parameters_as(const std::vector<NamedTensor>& parameters,
                                       at::ScalarType dtype) {
  std::vector<NamedTensor> out;
  for (const auto& p : parameters) out.push_back({p.name, p.tensor.detach().to(dtype)});
  return out;
}

void check_parameters_match(const torch::nn::Module& module,
                            const std::vector<NamedTensor>& tensors, const std::string& source,
                            const std::string& hint) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t.tensor;
  std::set<std::string> expected;
  for (const auto& item : module.named_parameters()) {
    expected.insert(item.key());
    auto it = by_name.find(item.key());
    if (it == by_name.end()) {
      throw ConfigError(source, fmt::format("tensor \"{}\" is missing", item.key()), hint);
    }
    if (it->second->sizes() != item.value().sizes()) {
      throw ConfigError(
          source,
          fmt::format("tensor \"{}\" has shape {} there, {} in this config's model", item.key(),
                      shape_text(it->second->sizes()), shape_text(item.value().sizes())),
          hint);
    }
    if (!at::isFloatingType(it->second->scalar_type())) {
      throw ConfigError(source,
                        fmt::format("tensor \"{}\" has dtype {}, not a floating type", item.key(),
                                    c10::toString(it->second->scalar_type())),
                        hint);
    }
  }
  for (const auto& item : module.named_buffers()) expected.insert(item.key());
  for (const auto& t : tensors) {
    if (!expected.count(t.name)) {
      throw ConfigError(
          source, fmt::format("tensor \"{}\" is not a parameter of this config's model", t.name),
          hint);
    }
  }
}

void load_parameters(torch::nn::Module& module, const std::vector<NamedTensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> by_name;
  for (const auto& t : tensors) by_name[t.name] = t.tensor;
  for (auto& item : module.named_parameters()) item.value().copy_(by_name.at(item.key()));
}

std::vector<std::optional<AdamWParamSnapshot>> adamw_param_states(
    const CheckpointContents& c, const std::vector<NamedSizes>& params, const std::string& source) {
  MetadataReader meta(c.optimizer_metadata, source);
  if (meta.text("format") != "titan-train adamw 1") meta.fail("not a titan-train AdamW state");
  std::map<std::string, at::Tensor> state;
  for (const auto& t : c.optimizer) state[t.name] = t.tensor;
  std::vector<std::optional<AdamWParamSnapshot>> out;
  for (const auto& p : params) {
    const std::string step_key = p.name + ".step";
    if (!c.optimizer_metadata.count(step_key)) {
      out.emplace_back();
      continue;
    }
    std::vector<int64_t> sizes = p.sizes;
    if (!sizes.empty()) {
      const RowRange kept = c.optimizer_rows.rows_of(sizes[0]);
      sizes[0] = kept.end - kept.begin;
    }
    AdamWParamSnapshot ps;
    ps.step = meta.integer(step_key);
    at::Tensor* targets[] = {&ps.exp_avg, &ps.exp_avg_sq, &ps.max_exp_avg_sq};
    for (size_t f = 0; f < 3; ++f) {
      const std::string key = p.name + "." + kAdamWTensors[f];
      auto it = state.find(key);
      if (it == state.end()) {
        if (f < 2) meta.fail(fmt::format("tensor \"{}\" is missing", key));
        continue;
      }
      if (it->second.sizes() != at::IntArrayRef(sizes)) {
        meta.fail(fmt::format("tensor \"{}\" has shape {}, its parameter {}", key,
                              shape_text(it->second.sizes()), shape_text(sizes)));
      }
      *targets[f] = it->second;
    }
    out.push_back(std::move(ps));
  }
  return out;
}

void restore_full_checkpoint(const CheckpointContents& c, const std::string& source,
                             torch::nn::Module& module, torch::optim::AdamW& optimizer) {
  MetadataReader meta(c.optimizer_metadata, source);
  Snapshot s = take_snapshot(module, optimizer, c.state, SnapshotCopy::kShare);
  const auto params = named_parameters(module);
  std::vector<NamedSizes> shapes;
  for (const auto& p : params) shapes.push_back({p.name, p.tensor.sizes().vec()});
  auto states = adamw_param_states(c, shapes, source);
  std::map<std::string, at::Tensor> model;
  for (const auto& t : c.model) model[t.name] = t.tensor;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    s.module_tensors[i] = model.at(p.name).to(p.tensor.options());
    if (states[i]) {
      for (at::Tensor* t :
           {&states[i]->exp_avg, &states[i]->exp_avg_sq, &states[i]->max_exp_avg_sq}) {
        if (t->defined()) *t = t->to(p.tensor.options());
      }
    }
    s.optimizer[i] = std::move(states[i]);
  }
  if (meta.integer("groups") != static_cast<int64_t>(s.groups.size())) {
    meta.fail(fmt::format("{} parameter groups, this optimizer has {}", meta.integer("groups"),
                          s.groups.size()));
  }
  for (size_t g = 0; g < s.groups.size(); ++g) {
    const std::string prefix = fmt::format("group.{}.", g);
    auto& group = s.groups[g];
    group.lr = meta.number(prefix + "lr");
    group.beta1 = meta.number(prefix + "beta1");
    group.beta2 = meta.number(prefix + "beta2");
    group.eps = meta.number(prefix + "eps");
    group.weight_decay = meta.number(prefix + "weight_decay");
    group.amsgrad = meta.text(prefix + "amsgrad") == "true";
  }
  restore_snapshot(s, module, optimizer);
}

}  // namespace titan

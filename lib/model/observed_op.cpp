#include "model/observed_op.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include "model/causal_attention.h"
#include "model/linear.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"

namespace titan {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, ObservedOpFunction> ops;
};

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry;
    made->ops["titan::rms_norm"] = [](const std::vector<c10::IValue>& in) {
      return rms_norm(in.at(0).toTensor(), in.at(1).toTensor(), in.at(2).toDouble());
    };
    made->ops["titan::swiglu"] = [](const std::vector<c10::IValue>& in) {
      return swiglu(in.at(0).toTensor(), in.at(1).toTensor());
    };
    made->ops["titan::causal_attention"] = [](const std::vector<c10::IValue>& in) {
      return causal_attention(in.at(0).toTensor(), in.at(1).toTensor(), in.at(2).toTensor());
    };
    made->ops["titan::linear"] = [](const std::vector<c10::IValue>& in) {
      const auto &x = in.at(0).toTensor(), &w = in.at(1).toTensor();
      return linear_kernel_for(x.scalar_type(), x.device()) == LinearKernel::kOnednn
                 ? onednn_linear(x, w)
                 : at::linear(x, w);
    };
    return made;
  }();
  return *r;
}

}  // namespace

void register_observed_op(const std::string& name, ObservedOpFunction fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ops[name] = std::move(fn);
}

bool is_observed_op(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.ops.count(name) > 0;
}

at::Tensor run_observed_op(const std::string& name, const std::vector<c10::IValue>& inputs) {
  ObservedOpFunction fn;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.ops.find(name);
    if (it == r.ops.end()) throw std::out_of_range("run_observed_op: no op named " + name);
    fn = it->second;
  }
  return fn(inputs);
}

}  // namespace titan

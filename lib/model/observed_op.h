// Shows a hand-written kernel to at::RecordFunction observers (profilers, the recompute checker's
// op trace, the precision probe) as one op with its inputs and output, instead of the calls inside
// it; and runs such an op again by name (the precision probe re-executes ops on other inputs).
// Files including this must be compiled with NDEBUG (libtorch's RecordFunction layout), as all of
// titan's are.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace titan {

// Requires name to outlive the call (a string literal). Runs compute() -> at::Tensor as the op
// `name` whose arguments are `inputs` (what run_observed_op is given back); observers see its
// output. The ops compute runs are seen nested inside it, unless it hides them
// (at::DisableRecordFunctionGuard).
template <typename Compute>
at::Tensor observed_as_one_op(const char* name, std::initializer_list<c10::IValue> inputs,
                              const Compute& compute) {
  at::RecordFunction record(at::RecordScope::FUNCTION);
  if (record.isActive()) {
    if (record.needsInputs()) {
      record.before(name, c10::ArrayRef<const c10::IValue>(inputs.begin(), inputs.size()));
    } else {
      record.before(name);
    }
  }
  at::Tensor out = compute();
  if (record.isActive() && record.needsOutputs()) record.setOutputs(std::vector<c10::IValue>{out});
  return out;
}

// Runs an op named `name` with `inputs` (as observed_as_one_op recorded them).
using ObservedOpFunction = std::function<at::Tensor(const std::vector<c10::IValue>& inputs)>;

// Makes `name` runnable by run_observed_op (tests plant ops of their own). titan's own ops
// (titan::rms_norm, titan::swiglu, titan::causal_attention, titan::linear) are registered
// already.
void register_observed_op(const std::string& name, ObservedOpFunction fn);

// Whether run_observed_op knows `name`.
bool is_observed_op(const std::string& name);

// Runs op `name` on `inputs`, through the kernel its inputs' dtype and device select. Throws
// std::out_of_range for a name not registered.
at::Tensor run_observed_op(const std::string& name, const std::vector<c10::IValue>& inputs);

}  // namespace titan

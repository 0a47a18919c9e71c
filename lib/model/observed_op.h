// Shows a hand-written kernel to at::RecordFunction observers (profilers, the recompute checker's
// op trace) as one op with its output, instead of the calls inside it. Files including this must
// be compiled with NDEBUG (libtorch's RecordFunction layout), as all of titan's are.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <vector>

namespace titan {

// Requires name to outlive the call (a string literal). Runs compute() -> at::Tensor as the op
// `name`; observers see its output. compute should hide its own ops from observers
// (at::DisableRecordFunctionGuard), or they are seen as well.
template <typename Compute>
at::Tensor observed_as_one_op(const char* name, const Compute& compute) {
  at::RecordFunction record(at::RecordScope::FUNCTION);
  if (record.isActive()) record.before(name);
  at::Tensor out = compute();
  if (record.isActive() && record.needsOutputs()) record.setOutputs(std::vector<c10::IValue>{out});
  return out;
}

}  // namespace titan

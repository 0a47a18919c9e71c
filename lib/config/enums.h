// The closed sets of values a config key can take, parsed once at the config boundary.
//
// Each enum's values are numbered 0..n-1 in declaration order, and enum_names<E>() spells them
// as TOML and the command line do, in the same order. Consumers switch over the enums with no
// default branch, so a new value is a compile error (-Wswitch) wherever it is not handled.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace titan {

// The c4 kinds read a local copy in the c4 layout (data/sources.h).
enum class DatasetKind { kSynthetic, kText, kJsonl, kTokens, kC4, kC4Test, kC4Validation };
enum class TokenDtype { kUint16, kUint32 };
enum class DeviceChoice { kAuto, kCpu, kCuda };
// [comm] backend: the collectives of several processes (see lib/distributed/process_group.h).
enum class CommBackend { kAuto, kGloo, kNccl };
// [training] mixed_precision_param: kAuto is bfloat16 autocast on CUDA and float32 on CPU.
enum class MixedPrecision { kBfloat16, kFloat32, kAuto };
enum class DecayType { kLinear, kSqrt, kCosine };
enum class ExportDtype { kFloat32, kBfloat16, kFloat16 };
// kMemoryBudget (torchtitan's, needs torch.compile) is refused (validate()).
enum class AcMode { kNone, kFull, kSelective, kMemoryBudget };
// [training] dtype: the parameters' dtype while building the model (bfloat16 is refused).
enum class TrainingDtype { kFloat32, kBfloat16 };
// [optimizer] implementation: PyTorch's three AdamW code paths; titan-train's computes the same
// bits whichever is named.
enum class OptimizerImplementation { kFused, kForeach, kForLoop };
// [debug] numerics_trace: what numerics.log records (see lib/train/numerics_trace.h).
enum class NumericsTrace { kNone, kBlocks, kOps };
// [debug] rerun_on: which steps the rerun check re-executes (see lib/train/rerun.h).
enum class RerunOn { kNone, kNan, kSpike, kBoth };
// [debug] rerun_action: what follows a rerun.
enum class RerunAction { kStop, kSkip, kContinue };
// [debug] precision_reference: the dtype a precision step is executed again in.
enum class PrecisionReference { kFloat64, kFloat32 };
// [debug] grad_norm_accumulate: the dtype of the gradient norm's sum of squares.
enum class GradNormAccumulate { kFloat32, kFloat64 };
// [debug] cpu_kernels: titan's fused CPU kernels at the widest vectors the CPU has, the same held
// to AVX2, or ATen's ops everywhere.
enum class CpuKernels { kFused, kFusedAvx2, kAten };
// [debug] cpu_linear: the library the linear layers' float32 matmuls run on, on the CPU.
enum class CpuLinear { kAten, kOnednn };
// [activation_checkpoint] determinism_check: what the recompute checker compares.
enum class RecomputeCheck {
  kDefault,  // op count, and each op's output shapes, dtypes and devices (as PyTorch's default)
  kBitwise,  // also every top-level op output's bits (checksums) and the block output's
  kNone,     // no comparison
};

// The spellings of E's values, indexed by value. Specialized for each enum above, and for other
// libraries' closed sets (the model's and the optimizer's kernels) with TITAN_ENUM_NAMES.
template <class E>
const std::vector<std::string>& enum_names();

// Defines enum_names<E>() in a .cpp file (the names in E's declaration order); the header that
// declares E declares the specialization.
#define TITAN_ENUM_NAMES(E, ...)                              \
  template <>                                                 \
  const std::vector<std::string>& enum_names<E>() {           \
    static const std::vector<std::string> names{__VA_ARGS__}; \
    return names;                                             \
  }

template <class E>
std::string to_string(E value) {
  return enum_names<E>().at(static_cast<size_t>(value));
}

// The value spelled `text` (exact match), or nullopt.
template <class E>
std::optional<E> parse_enum(const std::string& text) {
  const auto& names = enum_names<E>();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  return std::nullopt;
}

template <>
const std::vector<std::string>& enum_names<DatasetKind>();
template <>
const std::vector<std::string>& enum_names<TokenDtype>();
template <>
const std::vector<std::string>& enum_names<DeviceChoice>();
template <>
const std::vector<std::string>& enum_names<CommBackend>();
template <>
const std::vector<std::string>& enum_names<MixedPrecision>();
template <>
const std::vector<std::string>& enum_names<DecayType>();
template <>
const std::vector<std::string>& enum_names<ExportDtype>();
template <>
const std::vector<std::string>& enum_names<AcMode>();
template <>
const std::vector<std::string>& enum_names<RecomputeCheck>();
template <>
const std::vector<std::string>& enum_names<NumericsTrace>();
template <>
const std::vector<std::string>& enum_names<RerunOn>();
template <>
const std::vector<std::string>& enum_names<RerunAction>();
template <>
const std::vector<std::string>& enum_names<PrecisionReference>();
template <>
const std::vector<std::string>& enum_names<GradNormAccumulate>();
template <>
const std::vector<std::string>& enum_names<CpuKernels>();
template <>
const std::vector<std::string>& enum_names<CpuLinear>();
template <>
const std::vector<std::string>& enum_names<TrainingDtype>();
template <>
const std::vector<std::string>& enum_names<OptimizerImplementation>();

}  // namespace titan

#include "config/enums.h"

namespace titan {

// Each list is in the enum's declaration order (test_config checks the round trip).

TITAN_ENUM_NAMES(DatasetKind, "synthetic", "text", "jsonl", "tokens", "c4", "c4_test",
                 "c4_validation")
TITAN_ENUM_NAMES(TokenDtype, "uint16", "uint32")
TITAN_ENUM_NAMES(DeviceChoice, "auto", "cpu", "cuda")
TITAN_ENUM_NAMES(CommBackend, "auto", "gloo", "nccl")
TITAN_ENUM_NAMES(MixedPrecision, "bfloat16", "float32", "auto")
TITAN_ENUM_NAMES(DecayType, "linear", "sqrt", "cosine")
TITAN_ENUM_NAMES(ExportDtype, "float32", "bfloat16", "float16")
TITAN_ENUM_NAMES(AcMode, "none", "full", "selective", "memory_budget")
TITAN_ENUM_NAMES(TrainingDtype, "float32", "bfloat16")
TITAN_ENUM_NAMES(OptimizerImplementation, "fused", "foreach", "for-loop")
TITAN_ENUM_NAMES(RecomputeCheck, "default", "bitwise", "none")
TITAN_ENUM_NAMES(NumericsTrace, "none", "blocks", "ops")
TITAN_ENUM_NAMES(RerunOn, "none", "nan", "spike", "both")
TITAN_ENUM_NAMES(RerunAction, "stop", "skip", "continue")
TITAN_ENUM_NAMES(PrecisionReference, "float64", "float32")
TITAN_ENUM_NAMES(GradNormAccumulate, "float32", "float64")
TITAN_ENUM_NAMES(CpuKernels, "fused", "fused_avx2", "aten")
TITAN_ENUM_NAMES(CpuLinear, "aten", "onednn")

}  // namespace titan

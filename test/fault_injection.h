// Planted faults for the numerics and rerun tests, through the tracer's test-only seam
// (NumericsTracer::set_block_output_hook): no config key reaches them.
#pragma once

#include <cstdint>
#include <memory>

#include "instruments/numerics_trace.h"

namespace titan::test {

// At `step`, block `layer`'s output x becomes x + (nextafter(x, target) - x), inside the block's
// op trace, with target +inf (1 ulp up) when `ulps` is 1, or x itself (no change, the same ops)
// when 0: two runs differing only in `ulps` part at exactly that block and that op. With `once`,
// only the step's first execution changes anything (reruns run the same ops unchanged).
std::shared_ptr<BlockOutputHook> ulp_perturbation(int64_t step, int64_t layer, int ulps,
                                                  bool once = false);

// At `step`, block `layer`'s output gets +inf added to its first element by an aten::add inside
// the block's op trace (every execution of the step, or with `once` the first only).
std::shared_ptr<BlockOutputHook> infinity_fault(int64_t step, int64_t layer, bool once = false);

// At `step`, block `layer`'s output goes through one more op inside the block's trace,
// "titan::test_bfloat16_rounding": float32 values rounded to bfloat16 (and back), float64 values
// unchanged. A precision step's run loses precision there and its reference does not.
std::shared_ptr<BlockOutputHook> bfloat16_rounding(int64_t step, int64_t layer);

// At `step`, block `layer`'s output goes through one more op inside the block's trace,
// "titan::test_scaling": float32 values multiplied by `factor` (1: unchanged, bit for bit),
// float64 values unchanged. The op is registered for re-execution with this factor (the last
// hook made decides), so a precision measure's added error of the op is |factor - 1|.
std::shared_ptr<BlockOutputHook> scaled_output(int64_t step, int64_t layer, double factor);

}  // namespace titan::test

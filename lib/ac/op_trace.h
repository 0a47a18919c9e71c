// Recording the ATen ops a block runs, for the recompute checker.
//
// A TraceRecorder installs a thread-local at::RecordFunction callback for its lifetime and
// appends one OpRecord per op run on this thread, in the order ops start (an op before the ops
// it calls), its outputs filled in when it ends. The hot path keeps only metadata: an interned
// op name pointer (no strings are built), and per tensor output its dtype, device and sizes,
// plus, in checksum mode, a 64-bit hash of its bytes. Checksums cover the outputs of top-level
// ops (those the block calls itself): an op nested inside one (mm inside matmul, bernoulli_
// inside dropout) is reflected in its caller's output, so hashing it again would only cost time,
// and a value difference is named by the outermost op whose output differs. Input tensor ids
// are captured only when asked (debug traces).
// Files using at::RecordFunction must be compiled with NDEBUG (libtorch's struct layout).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/operator_name.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace titan::ac {

struct OutputMeta {
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  c10::SmallVector<int64_t, 4> sizes;
  bool hashed = false;    // checksum mode, and the output holds values of its own
  uint64_t checksum = 0;  // of the output's bytes, when hashed
  double max_abs = 0;     // largest |value|, when hashed and the trace asks for it (floating)
  int64_t id = -1;        // debug mode: "$id" in traces
};

struct OpRecord {
  const char* name = "";  // the op's name, e.g. "aten::mm" (interned: lives as long as the process)
  bool top_level = true;  // not called from inside another recorded op
  c10::SmallVector<OutputMeta, 1> outputs;
  std::vector<int64_t> input_ids;  // debug mode: ids of tensor inputs (-1: not seen before)
  // keep_values mode, top-level ops only: the op's arguments as it was called (tensors detached;
  // an in-place op's inputs copied before it writes them), its schema when it has one (ATen's
  // ops: it can be called again through the dispatcher), and its first output when that holds
  // values the op computed (not a view of an input, not uninitialized memory).
  std::vector<c10::IValue> inputs;
  c10::optional<c10::OperatorName> schema;
  at::Tensor value;
};

struct OpTrace {
  std::vector<OpRecord> ops;
  bool checksums = false;                        // hash op outputs (bitwise mode)
  bool capture_inputs = false;                   // remember tensor identities (debug mode)
  bool max_abs = false;                          // also the max |value| of hashed float outputs
  bool keep_values = false;                      // keep top-level ops' inputs and outputs
  std::unordered_map<const void*, int64_t> ids;  // TensorImpl -> $id, debug mode only
  int64_t next_id = 0;

  // "$3: f32[4, 512, 256] = aten::mm($1, $2)"
  std::string format_line(size_t index) const;
};

// Records ops run on this thread into `trace` while alive. Recorders nest: one created while
// another is alive takes the thread's ops until it ends (an activation-checkpointed block's
// recorder inside the numerics trace's), through the outer one's callback, which must then
// capture inputs when the inner one needs them (checksums or debug ids).
class TraceRecorder {
 public:
  explicit TraceRecorder(OpTrace& trace);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Gives `t` an id in the trace (debug mode), e.g. the block's input before it runs.
  static void name_tensor(OpTrace& trace, const at::Tensor& t);

 private:
  uint64_t handle_ = 0;
  bool owns_callback_ = false;
  OpTrace* previous_;
  std::vector<size_t> previous_open_ops_;
};

// "f32[4, 512, 256]"
std::string describe_meta(const OutputMeta& meta);
// "f32", "bf16", "i64", ...: the dtype as traces spell it.
std::string dtype_abbreviation(at::ScalarType dtype);

}  // namespace titan::ac

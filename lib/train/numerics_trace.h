// Recording <dump_folder>/numerics.log (format: lib/metrics/numerics_log.h) during training.
//
// A ForwardObserver on the model: every debug.numerics_freq-th step it records the checksum,
// mean and max abs of the embedding output, each block's output, the final norm's output and
// the logits (per micro-batch), then, before clipping, of every parameter's gradient in backward
// order. With level "ops" it also records each block's top-level ATen ops with the recompute
// checker's op tracer (lib/ac/op_trace.h), a checksum and max abs per op output. Steps not traced
// cost one branch per stage.
//
// The rerun check (lib/train/rerun.h) also asks for op-level traces of single steps, returned to
// it as text, whatever numerics.log records (or whether it is written at all). With activation
// checkpointing and its recompute checker, a checked block's ops come from the checker's forward
// trace (lib/ac/checkpoint.h: CheckpointContext::observer_trace).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ac/checkpoint.h"
#include "ac/op_trace.h"
#include "model/llama.h"
#include "util/files.h"

namespace titan {

class NumericsTracer : public ForwardObserver {
 public:
  // `level` is what numerics.log records (kNone: no file, traces for the rerun check only).
  // `ac_context` is the activation checkpointing context of the model's blocks (may be null).
  // Writes nothing until open().
  NumericsTracer(NumericsTrace level, int64_t freq,
                 std::shared_ptr<ac::CheckpointContext> ac_context = nullptr);
  ~NumericsTracer() override;

  // Observes `model`'s forwards and remembers its parameters for the gradients.
  void attach(Transformer& model);

  // Writes the header to `path`, followed (for a run resumed after step `resume_step` > 0) by the
  // old file's steps up to it. Throws RuntimeFailure naming the path.
  void open(const std::string& path, int64_t resume_step = 0);

  // Starts step `step`. It is traced at the file's level when numerics.log records it (a level
  // other than none, step % freq == 0 and `write_log`), and at op level when `capture_ops`.
  void begin_step(int64_t step, bool capture_ops = false, bool write_log = true);
  bool tracing() const { return tracing_; }
  bool writes_log() const { return level_ != NumericsTrace::kNone; }
  // Records every parameter's gradient (call before clipping).
  void record_gradients();
  // Ends the step: appends its lines to numerics.log (flushed) when it records this step, and
  // returns them (numerics.log's format, without the header), op lines included when captured;
  // "" when the step was not traced.
  std::string end_step();

  // Test-only (no config key reaches it): at `step`, block `layer`'s output x becomes
  // x + (nextafter(x, target) - x), inside the block's op trace, with target +inf (1 ulp up) when
  // `ulps` is 1, or x itself (no change, the same ops) when 0: two runs differing only in
  // `ulps` part at exactly that block and that op.
  void set_test_perturbation(int64_t step, int64_t layer, int ulps);
  // Test-only: at `step`, block `layer`'s output gets +inf added to its first element by an
  // aten::add inside the block's op trace (every execution of the step).
  void set_test_infinity(int64_t step, int64_t layer);
  // Test-only: the planted fault fires on the first execution of its step only; later ones
  // (reruns) run the same ops without changing anything.
  void set_test_fault_once();

  void block_starting(int64_t layer) override;
  void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) override;

 private:
  void perturb(at::Tensor& output);
  void write_ops(const std::string& block);

  NumericsTrace level_;
  int64_t freq_;
  std::shared_ptr<ac::CheckpointContext> ac_context_;
  bool logging_ = false;            // this step goes to numerics.log
  bool ops_ = false;                // this step records ops
  std::unique_ptr<LineFile> file_;  // numerics.log, whole lines (null until open())
  std::vector<std::pair<std::string, at::Tensor>> params_;  // backward order
  int64_t step_ = 0;
  bool tracing_ = false;
  int64_t micro_ = -1;
  std::string lines_;  // the current step's text
  ac::OpTrace trace_;
  std::unique_ptr<ac::TraceRecorder> recorder_;
  enum class Fault { kNone, kUlp, kInfinity };
  struct Perturbation {
    int64_t step, layer;
    Fault fault;
    bool once = false;
    bool fired = false;
  };
  std::optional<Perturbation> perturbation_;
};

// The tracer `level` asks for, attached to `model`; null for "none" unless `for_reruns` (the
// rerun check needs op traces). Touches no file.
std::shared_ptr<NumericsTracer> make_numerics_tracer(
    NumericsTrace level, int64_t freq, Transformer& model, bool for_reruns = false,
    std::shared_ptr<ac::CheckpointContext> ac_context = nullptr);

// Opens <dump_folder>/numerics.log (numerics.rank<N>.log for rank N > 0) for `tracer`, or, when
// it is null or records nothing, removes one an earlier run left there (compare would read it as
// this run's). Call with the outputs.
void open_numerics_log(NumericsTracer* tracer, const std::string& dump_folder,
                       int64_t resume_step = 0, int64_t rank = 0);

}  // namespace titan

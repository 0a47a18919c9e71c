// Recording <dump_folder>/numerics.log (format: lib/metrics/numerics_log.h) during training.
//
// A ForwardObserver on the model: every debug.numerics_freq-th step it records the checksum,
// mean and max abs of the embedding output, each block's output, the final norm's output and
// the logits (per micro-batch), then, before clipping, of every parameter's gradient in backward
// order. With level "ops" it also records each block's top-level ATen ops with the recompute
// checker's op tracer (lib/ac/op_trace.h), a checksum and max abs per op output. Steps not traced
// cost one branch per stage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ac/op_trace.h"
#include "model/llama.h"
#include "util/files.h"

namespace titan {

class NumericsTracer : public ForwardObserver {
 public:
  // Requires: level is kBlocks or kOps. Writes nothing until open().
  NumericsTracer(NumericsTrace level, int64_t freq);
  ~NumericsTracer() override;

  // Observes `model`'s forwards and remembers its parameters for the gradients.
  void attach(Transformer& model);

  // Writes the header to `path`, followed (for a run resumed after step `resume_step` > 0) by the
  // old file's steps up to it. Throws RuntimeFailure naming the path.
  void open(const std::string& path, int64_t resume_step = 0);

  // Starts step `step`: traced when step % freq == 0.
  void begin_step(int64_t step);
  bool tracing() const { return tracing_; }
  // Records every parameter's gradient (call before clipping).
  void record_gradients();
  // Appends the step's lines to numerics.log, flushed.
  void end_step();

  // Test-only (no config key reaches it): at `step`, block `layer`'s output x becomes
  // x + (nextafter(x, target) - x), inside the block's op trace, with target +inf (1 ulp up) when
  // `ulps` is 1, or x itself (no change, the same ops) when 0: two runs differing only in
  // `ulps` part at exactly that block and that op.
  void set_test_perturbation(int64_t step, int64_t layer, int ulps);

  void block_starting(int64_t layer) override;
  void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) override;

 private:
  void perturb(at::Tensor& output) const;
  void write_ops(const std::string& block);

  NumericsTrace level_;
  int64_t freq_;
  std::unique_ptr<LineFile> file_;  // numerics.log, whole lines (null until open())
  std::vector<std::pair<std::string, at::Tensor>> params_;  // backward order
  int64_t step_ = 0;
  bool tracing_ = false;
  int64_t micro_ = -1;
  std::string lines_;  // the current step's text
  ac::OpTrace ops_;
  std::unique_ptr<ac::TraceRecorder> recorder_;
  struct Perturbation {
    int64_t step, layer;
    int ulps;
  };
  std::optional<Perturbation> perturbation_;
};

// The tracer `level` asks for, attached to `model` (null for "none"). Touches no file.
std::shared_ptr<NumericsTracer> make_numerics_tracer(NumericsTrace level, int64_t freq,
                                                     Transformer& model);

// Opens <dump_folder>/numerics.log for `tracer`, or, when it is null, removes a numerics.log an
// earlier run left there (compare would read it as this run's). Call with the outputs.
void open_numerics_log(NumericsTracer* tracer, const std::string& dump_folder,
                       int64_t resume_step = 0);

}  // namespace titan

#include "instruments/validation.h"

#include <fmt/format.h>

#include <cstring>

#include "util/error.h"
#include "util/stop_signal.h"

namespace titan {

Validation::Validation(const ValidationConfig& config, std::shared_ptr<const TokenSource> source,
                       const BatchLayout& layout, ProcessGroup& group)
    : freq_(config.freq),
      steps_(config.steps),
      source_(std::move(source)),
      batches_(source_, layout),
      group_(group) {
  if (steps_ == -1 && source_->num_documents() == 0) {
    throw ConfigError(
        "validation.steps",
        fmt::format("-1 validates on the whole set, but {} never ends", source_->describe()),
        "set validation.steps to a number of batches");
  }
}

std::string Validation::describe() const {
  return fmt::format(
      "validation: at step 1 and every {} steps, {} of {}", freq_,
      steps_ == -1 ? std::string("the whole set") : fmt::format("{} batches", steps_),
      source_->describe());
}

void Validation::after_step(StepContext& context, StepOutcome& outcome) {
  const auto start = SteadyClock::now();
  Validated v;
  double sum = 0;
  const LoaderState at_start = batches_.state();
  for (int64_t b = 0; steps_ == -1 || b < steps_; ++b) {
    const int signal = agreed_stop_signal(
        group_, fmt::format("the stop check in the validation after step {}", context.step));
    if (signal != 0) {
      batches_.load_state(at_start);
      context.console << fmt::format(
          "[titan] validation after step {} stopped by {} after {} batches: not logged (the next "
          "validation starts from its batches)\n",
          context.step, stop_signal_name(signal), b);
      return;
    }
    const LoaderState before = batches_.state();
    const std::vector<Batch> batch = batches_.next_step();
    // With -1, the rest of the current pass over the set: a batch that wraps into the next pass
    // is left for the next validation (unless the set holds less than one batch).
    const bool wrapped = steps_ == -1 && batches_.state().epoch != at_start.epoch;
    if (wrapped && b > 0) {
      batches_.load_state(before);
      break;
    }
    const StepOutcome evaluated =
        context.engine.execute(context.step, batch, {}, StepMode::kEvaluate);
    sum += evaluated.loss;
    v.tokens += evaluated.tokens;
    ++v.batches;
    if (wrapped) break;
  }
  v.loss = v.batches > 0 ? sum / static_cast<double>(v.batches) : 0.0;
  v.seconds = seconds_since(start);
  cost_.seconds += v.seconds;
  ++cost_.count;
  outcome.findings.put(v);
}

std::string Validation::cost_line(const RunTotals& totals) const {
  if (cost_.count == 0) return "";
  return fmt::format("validation: {:.1f} ms each ({} validations), {:.2f}% of the run",
                     1e3 * cost_.per_count(), cost_.count, cost_.percent_of(totals.seconds));
}

std::string Validation::checkpoint_state() const {
  const LoaderState s = batches_.state();
  std::string bytes(sizeof s.epoch * 3, '\0');
  std::memcpy(&bytes[0], &s.epoch, sizeof s.epoch);
  std::memcpy(&bytes[8], &s.doc_cursor, sizeof s.doc_cursor);
  std::memcpy(&bytes[16], &s.offset, sizeof s.offset);
  return bytes;
}

void Validation::restore_checkpoint_state(const std::string& bytes) {
  if (bytes.size() != 24) {
    throw RuntimeFailure("the checkpoint's validation position is damaged",
                         "load another checkpoint, or exclude \"dataloader\" from loading");
  }
  LoaderState s;
  std::memcpy(&s.epoch, &bytes[0], sizeof s.epoch);
  std::memcpy(&s.doc_cursor, &bytes[8], sizeof s.doc_cursor);
  std::memcpy(&s.offset, &bytes[16], sizeof s.offset);
  batches_.load_state(s);
}

}  // namespace titan

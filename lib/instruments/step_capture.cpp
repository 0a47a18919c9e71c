#include "instruments/step_capture.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <ostream>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "config/loader.h"
#include "instruments/capture_format.h"
#include "metrics/fingerprint.h"
#include "util/error.h"
#include "util/files.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

Config with_float64_reference(Config config) {
  config.debug.precision_reference = PrecisionReference::kFloat64;
  return config;
}

uint64_t folder_bytes(const std::string& folder) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(folder, ec)) {
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  }
  return total;
}

}  // namespace

StepCapture::StepCapture(const Config& config, const RunFolder& folder, const ModelArgs& args,
                         const StepOptions& options, std::function<std::string()> machine)
    : run_config_(config),
      config_(with_float64_reference(config)),
      folder_(folder),
      steps_(config.debug.capture_steps.begin(), config.debug.capture_steps.end()),
      machine_(std::move(machine)),
      probe_(config_, folder, args, options) {}

std::string StepCapture::describe() const {
  std::vector<int64_t> steps(steps_.begin(), steps_.end());
  return fmt::format("step capture: step{} {} to {}/ (titan-train replay executes them again)",
                     steps.size() == 1 ? "" : "s", join_integers(steps, ", "),
                     folder_.subfolder(RunSubfolder::kCapture));
}

std::string StepCapture::final_folder(int64_t step) const {
  return folder_.subfolder(RunSubfolder::kCapture) + "/" + capture_folder_name(step);
}

void StepCapture::open_outputs(int64_t resume_step) {
  folder_.make(RunSubfolder::kCapture);
  for (int64_t step : steps_) {
    std::error_code ec;
    if (step <= resume_step || !fs::exists(fs::symlink_status(final_folder(step), ec))) continue;
    throw ConfigError(final_folder(step), "exists: a capture is never overwritten",
                      fmt::format("move it away, or leave {} out of debug.capture_steps", step));
  }
}

void StepCapture::write_state(StepContext& context) {
  const StepTarget& target = context.engine.target();
  auto* optimizer = dynamic_cast<torch::optim::AdamW*>(target.optimizer);
  if (!optimizer) throw std::logic_error("step capture: the run's optimizer is not AdamW");
  CheckpointContents contents = full_checkpoint(*target.model, *optimizer, context.engine.state());
  contents.config_hash = config_hash(run_config_);
  contents.config_toml = to_toml(run_config_);
  save_checkpoint(capture_path(temp_, CaptureFile::kState), contents);
  HashedFileWriter batch(capture_path(temp_, CaptureFile::kBatch));
  write_safetensors(batch, batch_tensors(context.batches), {});
  batch.finish();
}

void StepCapture::before_step(StepContext& context) {
  const auto start = SteadyClock::now();
  const std::string capture = folder_.make(RunSubfolder::kCapture);
  temp_ = fmt::format("{}/.{}.tmp", capture, capture_folder_name(context.step));
  std::error_code ec;
  fs::remove_all(temp_, ec);  // a killed run's
  try {
    make_output_folder(temp_, FolderLink::kRefuse);
    write_state(context);
  } catch (...) {
    fs::remove_all(temp_, ec);
    temp_.clear();
    throw;
  }
  kept_ = probe_.keep_state(context.engine.target().model);
  cost_.seconds += seconds_since(start);
}

void StepCapture::after_step(StepContext& context, StepOutcome& outcome) {
  const auto start = SteadyClock::now();
  const std::string folder = final_folder(context.step);
  std::error_code ec;
  try {
    const PrecisionReport report =
        probe_.attribute(context.step, *kept_, context.batches, &outcome);
    write_file_atomically(capture_path(temp_, CaptureFile::kTrace),
                          format_capture_record(capture_record_of(report)));
    write_file_atomically(capture_path(temp_, CaptureFile::kMachine), machine_());
    write_file_atomically(capture_path(temp_, CaptureFile::kConfig), to_toml(run_config_));
    write_capture_manifest(temp_, context.step);
    fsync_folder(temp_);
    if (std::rename(temp_.c_str(), folder.c_str()) != 0) {
      throw RuntimeFailure(fmt::format("cannot rename {} to {}: {}", temp_, folder,
                                       std::error_code(errno, std::generic_category()).message()));
    }
    fsync_folder(folder_.subfolder(RunSubfolder::kCapture));
    if (!report.reexecution_bitwise) {
      context.console << fmt::format(
          "[titan] capture: step {} executed again did not give the run's loss and grad_norm "
          "bits; its trace describes the re-execution\n",
          context.step);
    }
  } catch (...) {
    fs::remove_all(temp_, ec);
    temp_.clear();
    kept_.reset();
    throw;
  }
  temp_.clear();
  kept_.reset();
  cost_.seconds += seconds_since(start);
  ++cost_.count;
  const uint64_t bytes = folder_bytes(folder);
  bytes_ += bytes;
  context.console << fmt::format(
      "[titan] capture: step {} in {} ({:.1f} MiB); titan-train replay {} executes it again\n",
      context.step, folder, static_cast<double>(bytes) / (1 << 20), folder);
  context.console.flush();
}

std::string StepCapture::cost_line(const RunTotals& totals) const {
  if (cost_.count == 0) return "";
  const double step_seconds =
      totals.steps > 0 ? (totals.seconds - cost_.seconds) / static_cast<double>(totals.steps) : 0.0;
  return fmt::format(
      "step captures: {:.2f} s and {:.1f} MiB each ({} step{}), {:.1f}x a step's "
      "{:.3f} s",
      cost_.per_count(), static_cast<double>(bytes_) / (1 << 20) / static_cast<double>(cost_.count),
      cost_.count, cost_.count == 1 ? "" : "s",
      step_seconds > 0 ? cost_.per_count() / step_seconds : 0.0, step_seconds);
}

}  // namespace titan

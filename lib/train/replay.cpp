#include "train/replay.h"

#include <fmt/format.h>

#include <ostream>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "config/loader.h"
#include "config/run_folder.h"
#include "instruments/capture_format.h"
#include "instruments/precision_probe.h"
#include "metrics/fingerprint.h"
#include "metrics/machine.h"
#include "model/kernels.h"
#include "models/registry.h"
#include "train/run_components.h"
#include "train/run_context.h"
#include "train/run_model.h"
#include "util/error.h"
#include "util/files.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

constexpr uint64_t kMaxBatchBytes = uint64_t(1) << 30;

// The keys a replay may change: how the machine computes the captured step (kernels, threads,
// device, recomputation, determinism), never the step itself, whose batch, shapes, model and
// state are the capture's. Anything else would replay a step that was never captured.
bool replay_may_change(const std::string& key) {
  static const std::set<std::string> keys = {"debug.cpu_kernels",
                                             "debug.cpu_linear",
                                             "debug.grad_norm_accumulate",
                                             "debug.deterministic",
                                             "debug.deterministic_warn_only",
                                             "debug.batch_invariant",
                                             "training.cpu_threads",
                                             "training.device"};
  return keys.count(key) || key.rfind("activation_checkpoint.", 0) == 0;
}

void check_replay_override(const std::string& key) {
  if (replay_may_change(key)) return;
  throw ConfigError("--" + key,
                    "is fixed by the capture: replay changes only how the captured step is "
                    "computed",
                    "change debug.cpu_kernels, debug.cpu_linear, debug.grad_norm_accumulate, "
                    "debug.deterministic, debug.batch_invariant, training.cpu_threads, "
                    "training.device or activation_checkpoint.*; capture another step for "
                    "anything else");
}

// The captured config with the request's changes; whatever would make the replay write or
// capture anything is turned off. `hash`: config_hash of the config before those are turned off
// (the one the capture's machine.txt compares with).
Config replay_config(const ReplayRequest& request, uint64_t& hash) {
  Config config;
  const std::string path = capture_path(request.capture, CaptureFile::kConfig);
  apply_toml(config, read_file(path, kMaxTextFileBytes), path);
  for (const auto& [name, value] : request.overrides) {
    check_replay_override(name);
    apply_override(config, name, value);
  }
  if (request.device) apply_override(config, "training.device", *request.device);
  hash = config_hash(config);
  config.debug.capture_steps.clear();
  config.debug.precision_steps.clear();
  config.debug.precision_reference = PrecisionReference::kFloat64;
  config.debug.rerun_on = RerunOn::kNone;
  config.debug.rerun_steps.clear();
  config.debug.numerics_trace = NumericsTrace::kNone;
  config.checkpoint.enable = false;
  config.validation.enable = false;
  config.profiling.enable_profiling = false;
  config.profiling.enable_memory_snapshot = false;
  validate(config);
  return config;
}

// The state before the step: the parameters of the captured checkpoint and its RNG. Its folder
// is the one whose manifest the capture's manifest lists (check_capture_folder).
PrecisionProbe::KeptState captured_state(const std::string& capture, int64_t step,
                                         const ModelArgs& args) {
  const std::string state = capture_state_folder(capture, step);
  CheckpointContents contents;
  try {
    contents = load_checkpoint(state);
  } catch (const RuntimeFailure& e) {
    // Part of the capture's input: damaged means bad input here, as for the other files.
    throw ConfigError(state, e.what(), "copy the capture again, or capture the step again");
  }
  Model model = build_model(args);
  check_parameters_match(*model, contents.model, state,
                         "replay the capture with the model it was made with (model.flavor)");
  PrecisionProbe::KeptState kept;
  for (const auto& t : contents.model) kept.params.emplace_back(t.name, t.tensor.to(at::kFloat));
  kept.buffers = contents.state.model_buffers;
  kept.rng = contents.state.rng;
  return kept;
}

std::string replay_machine(const RunContext& context, const ModelArgs& args,
                           const StepOptions& options, uint64_t config_hash) {
  const ModelKernels kernels =
      model_kernels(args, context.device, options.autocast_bf16 ? at::kBFloat16 : at::kFloat);
  FingerprintHeader header =
      fingerprint_header_for(context, kernels, adamw_kernel_for(context.device), "");
  header.config_hash = config_hash;
  return FingerprintLog::format_header(header) + machine_details(context.device);
}

}  // namespace

ReplayReport replay_capture(const ReplayRequest& request, std::ostream& log,
                            std::shared_ptr<BlockOutputHook> hook) {
  const CaptureManifest manifest = check_capture_folder(request.capture);
  const CaptureRecord captured = parse_capture_record(
      read_file(capture_path(request.capture, CaptureFile::kTrace), kMaxLogFileBytes),
      capture_path(request.capture, CaptureFile::kTrace));
  const std::string machine_path = capture_path(request.capture, CaptureFile::kMachine);
  const auto capture_machine =
      parse_machine_description(read_file(machine_path, kMaxTextFileBytes), machine_path);
  const std::string batch_path = capture_path(request.capture, CaptureFile::kBatch);
  SafetensorsContents batch_file;
  try {
    batch_file = parse_safetensors(read_file(batch_path, kMaxBatchBytes), batch_path);
  } catch (const RuntimeFailure& e) {
    throw ConfigError(batch_path, e.what(), "copy the capture again, or capture the step again");
  }
  std::vector<Batch> batches = batches_of(batch_file.tensors, batch_path);
  if (captured.step != manifest.step) {
    throw ConfigError(capture_path(request.capture, CaptureFile::kTrace),
                      fmt::format("is step {}; the manifest says {}", captured.step, manifest.step),
                      "the capture is damaged: capture the step again");
  }

  uint64_t hash = 0;
  const Config config = replay_config(request, hash);
  RunContextOptions options;
  options.measure_peak_flops = false;
  const RunContext context = build_run_context(config, log, options);
  const ModelArgs args = model_args_for(context.config);
  const StepOptions step_options = step_options_for(context);
  PrecisionProbe::KeptState kept = captured_state(request.capture, manifest.step, args);

  const auto start = SteadyClock::now();
  PrecisionProbe probe(context.config, RunFolder(context.config), args, step_options);
  if (hook) probe.set_block_output_hook(hook);
  const PrecisionReport here = probe.attribute(captured.step, kept, batches, nullptr);
  const auto replay_machine_map =
      parse_machine_description(replay_machine(context, args, step_options, hash), "this machine");
  ReplayReport report =
      compare_replay(captured, capture_record_of(here), capture_machine, replay_machine_map);
  report.capture_folder = request.capture;
  report.captured_by = manifest.titan_version;
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace titan

#include "train/run_outputs.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <ostream>

#include "config/loader.h"
#include "config/run_folder.h"
#include "distributed/process_group.h"
#include "metrics/device_stats.h"
#include "util/error.h"
#include "util/files.h"
#include "util/stopwatch.h"
#include "util/strings.h"

namespace titan {
namespace {

void create_dump_folder(const std::string& folder) {
  try {
    make_output_folder(folder, FolderLink::kFollow);
  } catch (const RuntimeFailure& e) {
    throw ConfigError("job.dump_folder", e.what(), "choose a writable folder");
  }
}

// Rank 0 takes a lock with `take`; the other ranks write nothing before it has it, so that a run
// refused for a locked folder leaves the other run's per-rank files alone.
std::unique_ptr<RunLock> lock_on_rank0(const RunContext& c, const std::string& key,
                                       const std::function<std::unique_ptr<RunLock>()>& take) {
  const int64_t rank = c.world.rank;
  std::unique_ptr<RunLock> lock;
  std::optional<RankRefusal> refusal;
  if (rank == 0) {
    try {
      lock = take();
    } catch (const ConfigError& e) {
      if (c.world.world_size == 1) throw;
      refusal = RankRefusal{e.where(), e.message(), e.hint()};
    }
  }
  refusal = share_rank0_refusal(*c.process_group, key, refusal);
  if (refusal) {
    throw ConfigError(refusal->where, (rank == 0 ? "" : "(rank 0) ") + refusal->message,
                      refusal->hint);
  }
  return lock;
}

std::unique_ptr<RunLock> lock_dump_folder(const RunContext& c, const RunFolder& folder) {
  return lock_on_rank0(c, "dump_folder_lock", [&] {
    create_dump_folder(folder.path());
    return std::make_unique<RunLock>(folder.file(RunFile::kLock), folder.path(), "job.dump_folder");
  });
}

// Rank 0 makes the checkpoint folder at the start, so that a link planted in its path is refused
// before the first step rather than at the first save. It gets a lock of its own, whichever way
// it is named: another run may name it absolutely (its own dump folder elsewhere), and is then
// refused instead of saving into a live run's folder. (Unless it is the dump folder itself,
// whose lock the run already holds.)
std::unique_ptr<RunLock> prepare_checkpoint_folder(const RunContext& c, const RunFolder& folder) {
  if (!c.config.checkpoint.enable || c.config.checkpoint.load_only) return nullptr;  // no saves
  const std::string path = folder.subfolder(RunSubfolder::kCheckpoint);
  return lock_on_rank0(c, "checkpoint_folder_lock", [&]() -> std::unique_ptr<RunLock> {
    folder.make(RunSubfolder::kCheckpoint);
    std::error_code ec;
    if (std::filesystem::equivalent(path, folder.path(), ec)) return nullptr;
    return std::make_unique<RunLock>(path + "/" + run_file_name(RunFile::kLock), path,
                                     "checkpoint.folder");
  });
}

// A resumed run's rank 0 cuts every event file of the TensorBoard folder back to the resume step,
// also when this run writes none or its ranks write others: the steps after it were abandoned.
// A folder reached through a link is left alone (TensorBoard on, it is refused right after).
void cut_tensorboard_folder(const RunFolder& folder, int64_t resume_step, std::ostream& console) {
  namespace fs = std::filesystem;
  const std::string root = folder.subfolder(RunSubfolder::kTensorBoard);
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(root, ec))) return;
  const fs::path relative = fs::path(root).lexically_relative(folder.path());
  if (fs::weakly_canonical(root, ec) != fs::weakly_canonical(folder.path(), ec) / relative) return;
  for (const std::string& warning : cut_tensorboard_history(root, resume_step))
    console << "[titan] warning: " << warning << "\n";
}

// The event files' folder for this rank, or "" when it writes none. Rank 0 picks the run folder
// so that every rank writes under the same one.
std::string tensorboard_folder(const RunContext& c, const RunFolder& folder, int64_t resume_step) {
  const MetricsConfig& m = c.config.metrics;
  if (!m.enable_tensorboard) return "";
  std::string run;
  if (c.world.rank == 0) {
    const std::string root = folder.make(RunSubfolder::kTensorBoard);
    run = choose_tensorboard_run_folder(root, resume_step, current_minute());
  }
  if (c.world.world_size > 1 && m.save_for_all_ranks)
    run = c.process_group->broadcast("tensorboard_run_folder", run);
  if (!rank_writes_tensorboard(m, c.world.rank)) return "";
  if (!m.save_for_all_ranks) return run;
  make_output_folder(run, FolderLink::kRefuse);
  return run + "/rank_" + std::to_string(c.world.rank);
}

SummaryValue scalar(const std::string& tag, double value) {
  SummaryValue v;
  v.tag = tag;
  v.scalar = static_cast<float>(value);
  return v;
}

// torchtitan's tags, then the per-layer norms.
std::vector<SummaryValue> tensorboard_scalars(const StepMetrics& m) {
  std::vector<SummaryValue> values = {
      scalar("loss_metrics/global_avg_loss", m.loss),
      scalar("loss_metrics/global_max_loss", m.max_loss),
      scalar("grad_norm", m.grad_norm),
      scalar("throughput(tps)", m.tps),
      scalar("tflops", m.tflops),
      scalar("mfu(%)", m.mfu_pct),
      scalar("memory/max_reserved(GiB)", m.memory_gib),
      scalar("memory/max_reserved(%)", m.memory_pct),
      scalar("time_metrics/end_to_end(s)", m.step_time_s),
      scalar("lr", m.lr),
      scalar("n_tokens_seen", static_cast<double>(m.tokens_seen)),
  };
  for (const PartNorms& p : m.layers) {
    const std::string prefix = "layers/" + p.name + "/";
    values.push_back(scalar(prefix + "grad_norm", p.grad_norm));
    values.push_back(scalar(prefix + "weight_norm", p.weight_norm));
    values.push_back(scalar(prefix + "update_norm", p.update_norm));
    values.push_back(scalar(prefix + "update_ratio", p.update_ratio()));
  }
  return values;
}

}  // namespace

RunOutputs::RunOutputs(const RunContext& context, const FingerprintHeader& header,
                       const std::vector<std::shared_ptr<Instrument>>& instruments,
                       int64_t resume_step)
    : context_(context) {
  const RunFolder folder(context.config);
  lock_ = lock_dump_folder(context, folder);
  checkpoint_lock_ = prepare_checkpoint_folder(context, folder);
  const int64_t rank = context.world.rank;
  if (rank == 0 && resume_step > 0) cut_tensorboard_folder(folder, resume_step, console());
  // A planted link in the TensorBoard folder is refused before any other file changes.
  const std::string tb = tensorboard_folder(context, folder, resume_step);
  if (!tb.empty()) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(tb, resume_step);
    for (const std::string& warning : tensorboard_->warnings())
      console() << "[titan] warning: " << warning << "\n";
  }
  for (const auto& instrument : instruments) instrument->open_outputs(resume_step);
  // NCCL's flight recorder dumps there on a timeout (apply_flight_recorder_environment).
  if (context.process_group->backend() == "nccl" && context.config.comm.trace_buf_size > 0)
    folder.make(RunSubfolder::kCommTraces);
  if (rank == 0) {
    write_file_atomically(folder.file(RunFile::kConfig), to_toml(context.config));
    if (const std::string json = folder.config_json(); !json.empty()) {
      const std::string parent = std::filesystem::path(json).parent_path().string();
      if (parent != folder.path())
        make_output_folder_below(folder.path(), parent.substr(folder.path().size() + 1));
      write_file_atomically(json, to_json(context.config));
    }
    metrics_ = std::make_unique<JsonlWriter>(folder.file(RunFile::kMetrics), resume_step);
  }
  fingerprint_ = std::make_unique<FingerprintLog>(folder.file(RunFile::kFingerprint, rank), header,
                                                  resume_step);
  remove_stale_numerics_log(context.config.debug, folder.file(RunFile::kNumerics, rank));
}

void RunOutputs::log_step(const StepMetrics& m) {
  console() << "[titan] " << format_console_line(m, colors()) << std::endl;
  const std::string moe_load = format_moe_load_line(m);
  if (!moe_load.empty()) console() << "[titan]   " << moe_load << std::endl;
  check_console();
  if (metrics_) metrics_->write(m);
  if (tensorboard_) write_tensorboard(m.step, tensorboard_scalars(m));
}

const ConsoleColors& RunOutputs::colors() const {
  return console_colors(context_.console_is_terminal &&
                        !context_.config.metrics.disable_color_printing);
}

void RunOutputs::log_validation(int64_t step, const Validated& v) {
  const MemoryReading memory = read_and_reset_peak_memory(context_.device);
  const double tps = v.seconds > 0 ? static_cast<double>(v.tokens) / v.seconds : 0.0;
  const ConsoleColors& c = colors();
  console() << fmt::format(
                   "[titan] {}validate step: {:2}  {}loss: {:7.4f}  {}memory: {:5.2f}GiB({:.2f}%)  "
                   "{}tps: {}{}",
                   c.yellow, step, c.green, v.loss, c.turquoise, memory.peak_gib, memory.pct,
                   c.blue, with_thousands(std::llround(tps)), c.reset)
            << std::endl;
  check_console();
  if (metrics_) {
    metrics_->write_line(
        fmt::format("{{\"step\": {}, \"validation_loss\": {}, \"validation_tokens\": {}, "
                    "\"validation_batches\": {}, \"validation_seconds\": {}}}",
                    step, json_number(v.loss), v.tokens, v.batches, json_number(v.seconds)));
  }
  if (tensorboard_) {
    write_tensorboard(step, {scalar("validation_metrics/loss", v.loss),
                             scalar("validation_metrics/throughput(tps)", tps),
                             scalar("validation_metrics/memory/max_reserved(GiB)", memory.peak_gib),
                             scalar("validation_metrics/memory/max_reserved(%)", memory.pct)});
  }
}

void RunOutputs::write_tensorboard(int64_t step, const std::vector<SummaryValue>& values) {
  ScopedSeconds timed(tensorboard_cost_.seconds);
  tensorboard_->write(step, values);
  ++tensorboard_cost_.count;
}

void RunOutputs::write_histograms(int64_t step, const std::vector<SummaryValue>& histograms) {
  if (tensorboard_ && !histograms.empty()) write_tensorboard(step, histograms);
}

void RunOutputs::write_fingerprint(int64_t step, double loss, double grad_norm, double lr,
                                   int64_t tokens_seen, std::optional<uint64_t> params_checksum) {
  fingerprint_->write_step(step, loss, grad_norm, lr, tokens_seen, params_checksum);
}

std::vector<std::string> RunOutputs::cost_lines(double run_seconds) const {
  if (tensorboard_cost_.count == 0) return {};
  return {fmt::format("TensorBoard: {:.2f} ms a record ({} records), {:.2f}% of the run",
                      1e3 * tensorboard_cost_.per_count(), tensorboard_cost_.count,
                      tensorboard_cost_.percent_of(run_seconds))};
}

void RunOutputs::check_console() {
  if (console_failed_ || console()) return;
  console_failed_ = true;
  *context_.errors
      << "titan-train: warning: the console output failed (closed pipe or full device); "
         "training continues and metrics.jsonl and fingerprint.log keep the record\n";
}

}  // namespace titan

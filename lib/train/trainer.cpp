#include "train/trainer.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>

#include "ac/apply.h"
#include "config/loader.h"
#include "metrics/device_stats.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

ModelArgs model_args_for(const Config& config) {
  ModelArgs args = model_args_for_flavor(config.model.flavor);
  args.max_seq_len = config.training.seq_len;
  args.dropout = config.model.dropout;
  return args;
}

// Weights, gradients and AdamW's two moments: 16 bytes per fp32 parameter before activations.
// Refusing up front beats a bad_alloc (or the OOM killer) minutes into building the model.
void check_model_fits(const ModelArgs& args, const std::string& flavor, const c10::Device& device) {
  const double needed = 16.0 * static_cast<double>(args.num_params());
  const double available = device_memory_bytes(device);
  if (available > 0 && needed > available) {
    throw ConfigError(
        "model.flavor",
        fmt::format("{} needs at least {:.1f} GiB for weights, gradients and AdamW "
                    "state; {} has {:.1f} GiB",
                    flavor, needed / (1 << 30), device_name(device), available / (1 << 30)),
        "pick a smaller flavor (debugmodel runs anywhere)");
  }
}

void prepare_dump_folder(const std::string& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw ConfigError("job.dump_folder", fmt::format("cannot create {}: {}", folder, ec.message()),
                      "choose a writable folder");
  }
}

}  // namespace

c10::Device resolve_device(const std::string& name) {
  bool cuda = torch::cuda::is_available();
  if (name == "cuda" && !cuda) {
    throw ConfigError(
        "training.device", "\"cuda\" was requested but CUDA is not available",
        "use device = \"cpu\" or \"auto\", or a CUDA build of libtorch on a GPU machine");
  }
  if (name == "cuda" || (name == "auto" && cuda)) return c10::Device(c10::kCUDA, 0);
  return c10::Device(c10::kCPU);
}

Trainer::Trainer(const Config& config, std::ostream& log)
    : config_(config),
      log_(log),
      world_(world_from_environment()),
      determinism_(make_deterministic(config, world_, log)),
      device_(resolve_device(config.training.device)),
      args_(model_args_for(config)),
      schedule_(config.lr_scheduler, config.training.steps) {
  const auto& t = config_.training;
  if (world_.world_size > 1) {
    throw ConfigError("environment",
                      fmt::format("this is rank {} of {} processes, but multi-process "
                                  "data-parallel training is not available yet",
                                  world_.rank, world_.world_size),
                      "run a single process (srun --ntasks=1, or torchrun --nproc_per_node=1)");
  }
  const int64_t data_parallel = 1;
  const int64_t global =
      t.global_batch_size == -1 ? t.local_batch_size * data_parallel : t.global_batch_size;
  grad_accum_steps_ = global / (t.local_batch_size * data_parallel);
  autocast_bf16_ = device_.is_cuda() && t.mixed_precision_param == "bfloat16";

  check_model_fits(args_, config_.model.flavor, device_);
  source_ = make_token_source(t, determinism_.seed, t.seq_len + 1, args_.vocab_size);
  loader_ = std::make_unique<DataLoader>(source_, t.local_batch_size, t.seq_len, world_.rank,
                                         world_.world_size);

  config_.debug.seed = static_cast<int64_t>(determinism_.seed);  // config.toml repeats this run
  prepare_dump_folder(config_.job.dump_folder);
  write_file_atomically(config_.job.dump_folder + "/config.toml", to_toml(config_));
  jsonl_ = std::make_unique<JsonlWriter>(config_.job.dump_folder + "/metrics.jsonl");
  FingerprintHeader header{device_.is_cuda() ? "cuda" : "cpu", hardware_name(device_),
                           config_hash(config_), determinism_};
  fingerprint_ =
      std::make_unique<FingerprintLog>(config_.job.dump_folder + "/fingerprint.log", header);

  model_ = Transformer(args_);
  model_->to(device_);
  model_->init_weights();
  model_->train();
  ac_context_->debug_dir = config_.job.dump_folder + "/ac_debug";
  checkpointed_blocks_ =
      apply_activation_checkpointing(model_, config_.activation_checkpoint, ac_context_);
  numerics_ = make_numerics_tracer(config_.debug.numerics_trace, config_.debug.numerics_freq,
                                   config_.job.dump_folder, model_);
  params_ = model_->parameters();
  optimizer_ = build_optimizer(params_, config_.optimizer);
  flops_per_token_ = flops_per_token(args_, t.seq_len);
  peak_flops_ = peak_flops(device_);
  log_start();
}

Trainer::~Trainer() = default;

void Trainer::log_start() const {
  const auto& t = config_.training;
  const int64_t tokens_per_step = grad_accum_steps_ * t.local_batch_size * t.seq_len;
  log_ << fmt::format("[titan] titan-train {} on libtorch {}\n", TITAN_VERSION, TORCH_VERSION);
  log_ << fmt::format("[titan] model {} {}: {} parameters ({} non-embedding)\n", config_.model.name,
                      config_.model.flavor, with_thousands(args_.num_params()),
                      with_thousands(args_.num_params() - args_.num_embedding_params()));
  log_ << fmt::format("[titan] device {}, {} CPU threads, {}, seed {}{}\n", device_name(device_),
                      determinism_.cpu_threads, autocast_bf16_ ? "bf16 autocast" : "float32",
                      determinism_.seed,
                      determinism_.seed_was_drawn ? " (drawn: set debug.seed to repeat)" : "");
  log_ << format_determinism_block(determinism_,
                                   fmt::format("{} {}", device_.str(), hardware_name(device_)));
  log_ << fmt::format("[titan] data: {}\n", source_->describe());
  log_ << fmt::format(
      "[titan] {} steps x {} tokens (local_batch_size {} x seq_len {} x {} micro-batches), "
      "warmup {} steps, peak lr {}\n",
      t.steps, with_thousands(tokens_per_step), t.local_batch_size, t.seq_len, grad_accum_steps_,
      schedule_.warmup_steps(), config_.optimizer.lr);
  log_ << fmt::format("[titan] {:.3g} FLOPs per token, peak {:.1f} GFLOP/s{}; outputs in {}\n",
                      flops_per_token_, peak_flops_ / 1e9,
                      device_.is_cpu() ? " (measured sgemm)" : "", config_.job.dump_folder);
  const auto& ac = config_.activation_checkpoint;
  if (checkpointed_blocks_.empty()) {
    log_ << "[titan] activation checkpointing: off\n";
  } else {
    log_ << fmt::format(
        "[titan] activation checkpointing: mode {}{}, preserve_rng_state {}, "
        "determinism_check {}, debug {}\n",
        ac.mode, ac.mode == "selective" ? " every " + ac.selective_ac_option : "",
        ac.preserve_rng_state, ac.determinism_check, ac.debug);
    for (const auto& name : checkpointed_blocks_)
      log_ << "[titan]   checkpointing " << name << "\n";
  }
  if (numerics_) {
    log_ << fmt::format("[titan] numerics trace: {} every {} steps into numerics.log\n",
                        config_.debug.numerics_trace, config_.debug.numerics_freq);
  }
  log_.flush();
}

StepResult Trainer::train_step() {
  const auto& t = config_.training;
  std::vector<Batch> micro_batches;
  for (int64_t i = 0; i < grad_accum_steps_; ++i) micro_batches.push_back(loader_->next());
  StepOptions options;
  options.device = device_;
  options.autocast_bf16 = autocast_bf16_;
  options.max_norm = t.max_norm;
  const int64_t step = ++step_;
  ac_context_->step = step;
  const double lr = config_.optimizer.lr * schedule_.factor(step);
  if (numerics_) {
    numerics_->begin_step(step);
    if (numerics_->tracing()) options.before_clip = [this] { numerics_->record_gradients(); };
  }
  StepResult result = with_determinism_check(
      step, [&] { return run_step(model_, *optimizer_, params_, micro_batches, lr, options); });
  result.step = step;
  if (!std::isfinite(result.loss)) {
    const char* what = std::isnan(result.loss) ? "nan" : result.loss > 0 ? "inf" : "-inf";
    throw RuntimeFailure(fmt::format("loss is {} at step {}", what, step),
                         "lower optimizer.lr, raise lr_scheduler.warmup_steps, or check the data");
  }
  if (numerics_) numerics_->end_step();
  tokens_seen_ += grad_accum_steps_ * t.local_batch_size * t.seq_len;
  std::optional<uint64_t> checksum;
  if (step % config_.debug.fingerprint_freq == 0) {
    const auto start = Clock::now();
    checksum = tensors_checksum(params_);
    checksum_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  }
  fingerprint_->write_step(step, result.loss, result.grad_norm, lr, tokens_seen_, checksum);
  return result;
}

void Trainer::log_step(const StepResult& r, double seconds, int64_t steps) {
  const auto& t = config_.training;
  StepMetrics m;
  m.step = r.step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.lr = r.lr;
  m.tokens_seen = tokens_seen_;
  auto memory = read_and_reset_peak_memory(device_);
  m.memory_gib = memory.peak_gib;
  m.memory_pct = memory.pct;
  m.tps = static_cast<double>(steps * grad_accum_steps_ * t.local_batch_size * t.seq_len) / seconds;
  m.tflops = flops_per_token_ * m.tps / 1e12;
  m.mfu_pct = 100.0 * flops_per_token_ * m.tps / peak_flops_;
  m.step_time_s = seconds / static_cast<double>(steps);
  log_ << "[titan] " << format_console_line(m) << std::endl;
  jsonl_->write(m);
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  if (step_ == 0 && device_.is_cpu()) {
    // Baseline for activation memory (peak RSS minus this), used by scripts/bench_ac.sh.
    log_ << fmt::format("[titan] rss before the first step: {:.3f} GiB\n",
                        current_rss_bytes() / (1 << 30));
  }
  const auto start = Clock::now();
  auto last_log = start;
  int64_t steps_since_log = 0;
  while (step_ < config_.training.steps) {
    StepResult r = train_step();
    summary.losses.push_back(r.loss);
    ++steps_since_log;
    if (r.step == 1 || r.step % config_.metrics.log_freq == 0 || r.step == config_.training.steps) {
      auto now = Clock::now();
      log_step(r, std::chrono::duration<double>(now - last_log).count(), steps_since_log);
      last_log = now;
      steps_since_log = 0;
    }
  }
  summary.steps = static_cast<int64_t>(summary.losses.size());
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  summary.mean_tps = static_cast<double>(tokens_seen_) / summary.seconds;
  summary.checksum_seconds = checksum_seconds_;
  log_ << fmt::format("[titan] done: {} steps in {:.1f} s, mean tps {}, final loss {:.5f}\n",
                      summary.steps, summary.seconds,
                      with_thousands(std::llround(summary.mean_tps)),
                      summary.losses.empty() ? NAN : summary.losses.back());
  log_ << fmt::format("[titan] fingerprint checksums: {:.1f} ms in all, {:.2f}% of the run\n",
                      1e3 * checksum_seconds_, 100.0 * checksum_seconds_ / summary.seconds);
  log_.flush();
  return summary;
}

}  // namespace titan

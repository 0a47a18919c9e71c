#include "train/run_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <torch/version.h>

#include <cmath>
#include <ostream>

#include "config/loader.h"
#include "metrics/device_stats.h"
#include "optim/optimizer.h"
#include "util/malloc_tuning.h"
#include "util/omp_env.h"
#include "util/strings.h"

namespace titan {
namespace {

void log_data_parallel(const RunComponents& run, std::ostream& log) {
  if (run.context.process_group->size() <= 1) return;
  const Config& config = run.context.config;
  log << fmt::format(
      "[titan] data parallel: {} ranks over {} (replicate {}, shard {}): {}; every rank starts "
      "from parameters {:#018x}; timeouts {} s to step 1, {} s after\n",
      run.context.process_group->size(), run.context.process_group->backend(),
      run.data_parallel.replicate, run.data_parallel.shard, run.parallel->describe(),
      run.initial_checksum, config.comm.init_timeout_seconds, config.comm.train_timeout_seconds);
}

// An MoE model's routing and load balancing, and what it does differently from torchtitan v0.2.2.
void log_moe(const ModelArgs& args, std::ostream& log) {
  if (!args.moe) return;
  const MoEArgs& m = *args.moe;
  int64_t moe_layers = 0;
  for (int64_t layer = 0; layer < args.n_layers; ++layer) moe_layers += args.is_moe_layer(layer);
  log << fmt::format(
      "[titan] MoE: {} of {} blocks, {} experts of hidden {} (top {}, {} scores{}{}, {} shared), "
      "{} parameters active per token; top-k ties go to the lower expert index\n",
      moe_layers, args.n_layers, m.num_experts, args.moe_inter_dim, m.top_k, m.score_func,
      m.route_norm ? ", route_norm" : "",
      m.score_before_experts ? ", scores before the experts" : ", scores after the experts",
      m.num_shared_experts, with_thousands(args.num_active_params()));
  if (m.bf16_experts) {
    log << "[titan] MoE experts compute in bfloat16 (debug.moe_bf16_experts), as torchtitan's "
           "grouped_mm does\n";
  }
  if (m.force_load_balance) {
    log << "[titan] MoE routing: round-robin (debug.moe_force_load_balance)\n";
  }
  if (!m.load_balance_coeff) return;
  if (m.update_expert_bias) {
    log << fmt::format(
        "[titan] MoE load balancing: expert_bias += {} x sign(mean - count) before each "
        "optimizer step, from the tokens counted once per step (recomputation never counts)\n",
        *m.load_balance_coeff);
  } else {
    log << "[titan] MoE load balancing: expert_bias is never updated, as torchtitan v0.2.2 "
           "trains qwen3 (debug.qwen3_moe_load_balancing = true updates it as deepseek_v3's)\n";
  }
}

void log_activation_checkpointing(const RunComponents& run, std::ostream& log) {
  const auto& ac = run.context.config.activation_checkpoint;
  if (run.model.checkpointed.names.empty()) {
    log << "[titan] activation checkpointing: off\n";
    return;
  }
  log << fmt::format(
      "[titan] activation checkpointing: mode {}{}, preserve_rng_state {}, "
      "determinism_check {}, debug {}\n",
      to_string(ac.mode), ac.mode == AcMode::kSelective ? " every " + ac.selective_ac_option : "",
      ac.preserve_rng_state, to_string(ac.determinism_check), ac.debug);
  for (const auto& name : run.model.checkpointed.names) {
    log << "[titan]   checkpointing " << name << "\n";
  }
}

// What job.print_config, model.print_after_conversion and optimizer.implementation ask to be
// said at start.
void log_requested(const RunComponents& run, std::ostream& log) {
  const Config& config = run.context.config;
  if (config.job.print_config) log << "[titan] config (job.print_config):\n" << to_json(config);
  if (config.model.print_after_conversion) {
    log << "[titan] model (model.print_after_conversion; no converter runs here):\n";
    for (const auto& item : run.model.model->named_parameters()) {
      const at::Tensor& t = item.value();
      log << fmt::format("[titan]   {} {}{}\n", item.key(), c10::toString(t.scalar_type()),
                         fmt::format("{}", fmt::join(t.sizes(), "x")));
    }
  }
  if (config.optimizer.implementation != OptimizerImplementation::kFused) {
    log << fmt::format(
        "[titan] optimizer.implementation = {}: titan-train's AdamW ({}) computes "
        "the same bits for fused, foreach and for-loop\n",
        to_string(config.optimizer.implementation), to_string(adamw_kernel_of(*run.optimizer)));
  }
}

void log_instruments(const RunComponents& run, std::ostream& log) {
  for (const auto& instrument : run.instruments) {
    const std::string line = instrument->describe();
    if (!line.empty()) log << "[titan] " << line << "\n";
  }
}

}  // namespace

void log_run_start(const RunComponents& run, std::ostream& log) {
  const RunContext& ctx = run.context;
  const Config& config = ctx.config;
  const auto& t = config.training;
  const auto& d = ctx.determinism;
  const ModelArgs& args = run.model.args;
  log << fmt::format("[titan] titan-train {} on libtorch {}\n", TITAN_VERSION, TORCH_VERSION);
  log << fmt::format("[titan] model {} {}: {} parameters ({} non-embedding)\n", config.model.name,
                     config.model.flavor, with_thousands(args.num_params()),
                     with_thousands(args.num_params() - args.num_embedding_params()));
  log_moe(args, log);
  log << fmt::format(
      "[titan] kernels: attention {} (head_dim {}), SwiGLU {}, RMSNorm {}, AdamW {}, "
      "linear {}\n",
      to_string(run.model.kernels.attention), args.head_dim(), to_string(run.model.kernels.swiglu),
      to_string(run.model.kernels.rms_norm), to_string(adamw_kernel_of(*run.optimizer)),
      linear_kernel_name(run.model.kernels.linear));
  log << fmt::format("[titan] device {}, {} CPU threads, {}, seed {}{}\n", device_name(ctx.device),
                     d.cpu_threads,
                     run.engine->options().autocast_bf16 ? "bf16 autocast" : "float32", d.seed,
                     d.seed_was_drawn ? " (drawn: set debug.seed to repeat)" : "");
  for (const auto& warning : config_warnings(config)) {
    log << "[titan] warning: " << warning << "\n";
  }
  log << format_determinism_block(
      d, fmt::format("{} {}", ctx.device.str(), hardware_name(ctx.device)));
  if (!malloc_tuning_summary().empty()) log << "[titan] " << malloc_tuning_summary() << "\n";
  if (!ctx.device.is_cuda()) log << "[titan] " << idle_threads_summary() << "\n";
  for (const auto& note : run.data.text.notes) log << "[titan] " << note << "\n";
  log << fmt::format("[titan] data: {}\n", run.data.source->describe());
  log_data_parallel(run, log);
  log << fmt::format(
      "[titan] {} steps x {} tokens (local_batch_size {} x seq_len {} x {} micro-batches{}), "
      "warmup {} steps, peak lr {}\n",
      t.steps, with_thousands(run.plan.tokens_per_step), t.local_batch_size, t.seq_len,
      run.plan.micro_batches,
      ctx.process_group->size() > 1 ? fmt::format(" x {} ranks", ctx.process_group->size())
                                    : std::string(),
      run.engine->schedule().warmup_steps(), config.optimizer.lr);
  log << fmt::format("[titan] {:.3g} FLOPs per token, peak {:.1f} GFLOP/s{}; outputs in {}\n",
                     run.model.token_flops, ctx.peak_flops / 1e9,
                     !ctx.device.is_cpu()            ? ""
                     : cpu_peak_flops_override() > 0 ? " (TITAN_CPU_PEAK_FLOPS)"
                                                     : " (measured sgemm)",
                     config.job.dump_folder);
  log_activation_checkpointing(run, log);
  log_instruments(run, log);
  log_requested(run, log);
  for (const auto& note : run.start.notes) log << "[titan] " << note << "\n";
  log.flush();
}

void log_run_end(const RunComponents& run, const TrainSummary& summary,
                 const std::vector<std::string>& output_lines, const CostMeter& checksums,
                 std::ostream& log) {
  const int64_t ranks = run.context.process_group->size();
  if (summary.losses.empty()) {
    log << "[titan] done: no step completed\n";
    log.flush();
    return;
  }
  log << fmt::format(
      "[titan] done: {} steps in {:.1f} s, mean tps {}{}, final loss {:.5f}\n", summary.steps,
      summary.seconds, with_thousands(std::llround(summary.mean_tps / static_cast<double>(ranks))),
      ranks > 1
          ? fmt::format(" per rank ({} in all)", with_thousands(std::llround(summary.mean_tps)))
          : std::string(),
      summary.losses.back());
  for (const auto& line : run.parallel->cost_lines(summary.steps, summary.seconds))
    log << "[titan] " << line << "\n";
  log << fmt::format("[titan] fingerprint checksums: {:.1f} ms in all, {:.2f}% of the run\n",
                     1e3 * checksums.seconds, checksums.percent_of(summary.seconds));
  for (const auto& line : output_lines) log << "[titan] " << line << "\n";
  const double user = summary.cpu_user_s, sys = summary.cpu_system_s;
  log << fmt::format(
      "[titan] CPU time in the steps: user {:.1f} s, system {:.1f} s ({:.1f}% in the kernel), "
      "{} minor page faults per step\n",
      user, sys, user + sys > 0 ? 100.0 * sys / (user + sys) : 0.0,
      std::llround(summary.minor_faults / static_cast<double>(summary.steps)));
  const RunTotals totals{summary.steps, summary.seconds};
  for (const auto& instrument : run.instruments) {
    const std::string line = instrument->cost_line(totals);
    if (!line.empty()) log << "[titan] " << line << "\n";
  }
  log.flush();
}

}  // namespace titan

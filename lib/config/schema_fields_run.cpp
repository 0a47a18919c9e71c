// The field table's second part: [parallelism], [checkpoint], [activation_checkpoint], [comm],
// [debug].
#include "config/schema_build.h"

namespace titan::schema {
namespace {

constexpr const char* kPipelineOnly =
    "read only with pipeline parallelism, which titan-train does not have";
constexpr const char* kContextOnly =
    "read only with context parallelism, which titan-train does not have";
constexpr const char* kExpertParallelOnly =
    "read only with expert parallelism (expert_parallel_degree > 1), which titan-train does not "
    "have";
constexpr const char* kTensorOnly =
    "read only with tensor parallelism, which titan-train does not have";

void add_parallelism(Config& c, std::vector<FieldSpec>& out) {
  auto& p = c.parallelism;
  out.push_back(at_least(
      field("parallelism", "data_parallel_replicate_degree", &p.data_parallel_replicate_degree,
            "Data-parallel replicas: alone, replication (DDP); beside a shard degree above "
            "1, HSDP's replica groups; -1 fills the world size"),
      -1, kMaxDegree));
  out.push_back(
      at_least(field("parallelism", "data_parallel_shard_degree", &p.data_parallel_shard_degree,
                     "Data-parallel shards: FSDP over this many ranks (parameters, "
                     "gradients and optimizer state sharded per unit); -1 fills the world size"),
               -1, kMaxDegree));
  out.push_back(
      refused_hashed(at_least(field("parallelism", "tensor_parallel_degree",
                                    &p.tensor_parallel_degree, "Tensor parallelism"),
                              1, kMaxDegree),
                     "titan-train parallelizes over data only: data_parallel_shard_degree or "
                     "data_parallel_replicate_degree"));
  out.push_back(
      refused_hashed(at_least(field("parallelism", "pipeline_parallel_degree",
                                    &p.pipeline_parallel_degree, "Pipeline parallelism"),
                              1, kMaxDegree),
                     "titan-train parallelizes over data only: data_parallel_shard_degree or "
                     "data_parallel_replicate_degree"));
  out.push_back(refused_hashed(
      at_least(field("parallelism", "context_parallel_degree", &p.context_parallel_degree,
                     "Context parallelism"),
               1, kMaxDegree),
      "titan-train parallelizes over data only; a shorter training.seq_len, or activation "
      "checkpointing, lowers the memory per sequence"));
  // Out of the hash: when gathered parameters are freed changes memory, not a bit.
  out.push_back(not_hashed(
      with_choices(field("parallelism", "fsdp_reshard_after_forward", &p.fsdp_reshard_after_forward,
                         "When FSDP frees a unit's gathered parameters after its forward: "
                         "\"default\" (all but the final norm and output), \"always\", "
                         "\"never\" (kept until the unit's backward)"),
                   {"default", "always", "never"})));
  out.push_back(no_effect(field("parallelism", "disable_loss_parallel", &p.disable_loss_parallel,
                                "Compute the loss without tensor-parallel sharding of the logits"),
                          kTensorOnly));
  out.push_back(no_effect(
      field("parallelism", "enable_async_tensor_parallel", &p.enable_async_tensor_parallel,
            "Overlap tensor-parallel communication with compute (compiled)"),
      kTensorOnly));
  out.push_back(
      no_effect(field("parallelism", "module_fqns_per_model_part", &p.module_fqns_per_model_part,
                      "Modules of each pipeline stage, e.g. \"tok_embeddings,layers.0;"
                      "layers.1,norm,output\" on the command line"),
                kPipelineOnly));
  out.push_back(no_effect(field("parallelism", "pipeline_parallel_first_stage_less_layers",
                                &p.pipeline_parallel_first_stage_less_layers,
                                "Layers the first pipeline stage holds fewer than the others"),
                          kPipelineOnly));
  out.push_back(no_effect(field("parallelism", "pipeline_parallel_last_stage_less_layers",
                                &p.pipeline_parallel_last_stage_less_layers,
                                "Layers the last pipeline stage holds fewer than the others"),
                          kPipelineOnly));
  out.push_back(no_effect(field("parallelism", "pipeline_parallel_layers_per_stage",
                                &p.pipeline_parallel_layers_per_stage,
                                "Transformer blocks per pipeline stage; unset: derived"),
                          kPipelineOnly));
  out.push_back(no_effect(field("parallelism", "pipeline_parallel_schedule",
                                &p.pipeline_parallel_schedule, "Pipeline schedule"),
                          kPipelineOnly));
  out.push_back(
      no_effect(field("parallelism", "pipeline_parallel_schedule_csv",
                      &p.pipeline_parallel_schedule_csv, "A pipeline schedule from a CSV file"),
                kPipelineOnly));
  out.push_back(
      no_effect(field("parallelism", "pipeline_parallel_microbatch_size",
                      &p.pipeline_parallel_microbatch_size, "Sequences per pipeline micro-batch"),
                kPipelineOnly));
  out.push_back(no_effect(field("parallelism", "pipeline_parallel_expert_parallel_overlap",
                                &p.pipeline_parallel_expert_parallel_overlap,
                                "Overlap expert-parallel communication in DualPipeV"),
                          kPipelineOnly));
  out.push_back(no_effect(
      field("parallelism", "context_parallel_load_balancer", &p.context_parallel_load_balancer,
            "How context parallelism balances the causal mask's work"),
      kContextOnly));
  out.push_back(no_effect(with_choices(field("parallelism", "context_parallel_rotate_method",
                                             &p.context_parallel_rotate_method,
                                             "How context parallelism exchanges keys and values"),
                                       {"allgather", "alltoall"}),
                          kContextOnly));
  out.push_back(
      refused(at_least(field("parallelism", "expert_parallel_degree", &p.expert_parallel_degree,
                             "Expert parallelism (mixture-of-experts models)"),
                       1, kMaxDegree),
              "titan-train has no expert parallelism yet: leave it 1 (the experts are sharded "
              "with the other parameters under FSDP)"));
  out.push_back(
      refused(at_least(field("parallelism", "expert_tensor_parallel_degree",
                             &p.expert_tensor_parallel_degree, "Tensor parallelism inside experts"),
                       1, kMaxDegree),
              "titan-train has no expert parallelism yet: leave it 1"));
  out.push_back(no_effect(with_choices(field("parallelism", "expert_parallel_comm_backend",
                                             &p.expert_parallel_comm_backend,
                                             "Expert-parallel all-to-all implementation"),
                                       {"standard", "deepep"}),
                          kExpertParallelOnly));
}

void add_checkpoint(Config& c, std::vector<FieldSpec>& out) {
  auto& k = c.checkpoint;
  out.push_back(not_hashed(field("checkpoint", "enable", &k.enable,
                                 "Save checkpoints, and resume from the latest one at start")));
  out.push_back(not_hashed(
      field("checkpoint", "folder", &k.folder,
            "Checkpoint folder: inside job.dump_folder when relative, as given when absolute")));
  out.push_back(not_hashed(at_least(
      field("checkpoint", "interval", &k.interval, "Save every interval steps"), 1, kMaxSteps)));
  out.push_back(not_hashed(at_least(field("checkpoint", "keep_latest_k", &k.keep_latest_k,
                                          "Checkpoints to keep; 0 keeps all (1 is not allowed)"),
                                    0, kMaxSteps)));
  out.push_back(not_hashed(field("checkpoint", "last_save_model_only", &k.last_save_model_only,
                                 "The final save holds the model weights only")));
  out.push_back(not_hashed(enum_field("checkpoint", "export_dtype", &k.export_dtype,
                                      "dtype of a model-only final save")));
  out.push_back(not_hashed(at_least(
      field("checkpoint", "load_step", &k.load_step, "Step to resume from; -1 means the latest"),
      -1, kMaxSteps)));
  out.push_back(field("checkpoint", "initial_load_path", &k.initial_load_path,
                      "Weights to start from (a .safetensors file or a checkpoint folder) when "
                      "there is no checkpoint to resume; step 0, fresh optimizer"));
  out.push_back(
      not_hashed(field("checkpoint", "initial_load_model_only", &k.initial_load_model_only,
                       "initial_load_path gives the weights only (true), or the whole "
                       "state of a checkpoint: optimizer, step and data position")));
  out.push_back(not_hashed(field("checkpoint", "initial_load_in_hf", &k.initial_load_in_hf,
                                 "initial_load_path (or model.hf_assets_path) is a Hugging Face "
                                 "checkpoint")));
  out.push_back(
      refused(field("checkpoint", "initial_load_in_hf_quantized", &k.initial_load_in_hf_quantized,
                    "Dequantize a quantized Hugging Face checkpoint while loading"),
              "load an unquantized checkpoint (float32, bf16 or f16)"));
  out.push_back(not_hashed(field("checkpoint", "last_save_in_hf", &k.last_save_in_hf,
                                 "The final save is a Hugging Face checkpoint (needs "
                                 "last_save_model_only)")));
  out.push_back(no_effect(
      with_choices(field("checkpoint", "async_mode", &k.async_mode, "Save in the background"),
                   {"disabled", "async", "async_with_pinned_mem"}),
      "saves are synchronous here (the step waits for the write)"));
  out.push_back(not_hashed(field("checkpoint", "exclude_from_loading", &k.exclude_from_loading,
                                 "Parts of a checkpoint not to load on resume: model, optimizer, "
                                 "lr_scheduler, dataloader, train_state")));
  out.push_back(not_hashed(field("checkpoint", "enable_first_step_checkpoint",
                                 &k.enable_first_step_checkpoint, "Also save right after step 1")));
  out.push_back(not_hashed(field("checkpoint", "create_seed_checkpoint", &k.create_seed_checkpoint,
                                 "Write the initial weights as step-0 and exit (one process, "
                                 "checkpoint.enable)")));
  out.push_back(not_hashed(field("checkpoint", "load_only", &k.load_only,
                                 "Resume from checkpoints but never save one")));
  out.push_back(no_effect(
      field("checkpoint", "enable_ft_dataloader_checkpoints", &k.enable_ft_dataloader_checkpoints,
            "Per-replica loader checkpoints of fault-tolerant training"),
      "read only by fault_tolerance, which titan-train does not have"));
}

void add_activation_checkpoint(Config& c, std::vector<FieldSpec>& out) {
  auto& ac = c.activation_checkpoint;
  out.push_back(enum_field("activation_checkpoint", "mode", &ac.mode,
                           "Activation checkpointing of transformer blocks"));
  out.push_back(field("activation_checkpoint", "selective_ac_option", &ac.selective_ac_option,
                      "For selective mode: N checkpoints every Nth block (0: every block)"));
  out.push_back(field("activation_checkpoint", "preserve_rng_state", &ac.preserve_rng_state,
                      "Replay the forward's RNG state during recompute"));
  out.push_back(enum_field("activation_checkpoint", "determinism_check", &ac.determinism_check,
                           "Compare recomputation with the forward: default (op metadata), "
                           "bitwise (also values), none"));
  out.push_back(field("activation_checkpoint", "debug", &ac.debug,
                      "On a recompute mismatch, print and save both op traces"));
  out.push_back(
      no_effect(field("activation_checkpoint", "per_op_sac_force_recompute_mm_shapes_by_fqns",
                      &ac.per_op_sac_force_recompute_mm_shapes_by_fqns,
                      "Linear layers whose matmuls op-level selective AC recomputes"),
                "read only by op-level selective AC (selective_ac_option = \"op\"), "
                "which titan-train does not have"));
  out.push_back(no_effect(field("activation_checkpoint", "early_stop", &ac.early_stop,
                                "Stop a recomputation once the saved tensors are rebuilt"),
                          "a recomputation runs the whole block here; the gradients are the "
                          "same"));
  out.push_back(no_effect(field("activation_checkpoint", "memory_budget", &ac.memory_budget,
                                "Activation memory budget of mode \"memory_budget\""),
                          "read only by mode = \"memory_budget\", which is refused"));
  out.push_back(
      no_effect(field("activation_checkpoint", "visualize_memory_budget_pareto",
                      &ac.visualize_memory_budget_pareto, "Plot the memory budget's trade-offs"),
                "read only by mode = \"memory_budget\", which is refused"));
}

void add_comm(Config& c, std::vector<FieldSpec>& out) {
  auto& m = c.comm;
  out.push_back(not_hashed(enum_field("comm", "backend", &m.backend,
                                      "Collectives between processes: auto (nccl on CUDA, gloo "
                                      "on CPU; none for one process), gloo, or nccl (these two "
                                      "also for one process: a check of the backend's path)")));
  out.push_back(not_hashed(at_least(field("comm", "init_timeout_seconds", &m.init_timeout_seconds,
                                          "Seconds every rank may take to arrive at the "
                                          "rendezvous, and collectives may wait up to the end "
                                          "of step 1"),
                                    1, 86400)));
  out.push_back(not_hashed(at_least(field("comm", "train_timeout_seconds", &m.train_timeout_seconds,
                                          "Seconds a collective may wait for the other ranks "
                                          "after step 1"),
                                    1, 86400)));
  out.push_back(not_hashed(at_least(field("comm", "trace_buf_size", &m.trace_buf_size,
                                          "Entries of NCCL's flight recorder, dumped on a "
                                          "timeout (0: off; NCCL only)"),
                                    0)));
  out.push_back(not_hashed(field("comm", "save_traces_folder", &m.save_traces_folder,
                                 "Folder (in job.dump_folder) of NCCL's flight recorder dumps")));
  out.push_back(not_hashed(field("comm", "save_traces_file_prefix", &m.save_traces_file_prefix,
                                 "File name prefix of the flight recorder dumps")));
  out.push_back(refused(with_choices(field("comm", "mode", &m.mode,
                                           "Real collectives, or a fake backend for dry runs"),
                                     {"default", "fake_backend", "local_tensor"}),
                        "titan-train always runs real collectives: leave it \"default\""));
}

void add_debug(Config& c, std::vector<FieldSpec>& out) {
  auto& d = c.debug;
  out.push_back(at_least(field("debug", "seed", &d.seed,
                               "Base RNG seed (a non-negative integer); unset: drawn at start and "
                               "logged"),
                         0));
  out.push_back(field("debug", "deterministic", &d.deterministic,
                      "Use deterministic algorithms wherever possible (may be slower)"));
  out.push_back(field("debug", "deterministic_warn_only", &d.deterministic_warn_only,
                      "Warn about ops without a deterministic implementation instead of failing"));
  out.push_back(at_least(field("debug", "fingerprint_freq", &d.fingerprint_freq,
                               "fingerprint.log records a checksum of all parameters every N "
                               "steps"),
                         1, kMaxSteps));
  out.push_back(not_hashed(enum_field("debug", "numerics_trace", &d.numerics_trace,
                                      "numerics.log: checksum and statistics of each block's "
                                      "output and each gradient (blocks), also of every op "
                                      "inside the blocks (ops), or none")));
  out.push_back(not_hashed(at_least(
      field("debug", "numerics_freq", &d.numerics_freq, "numerics.log records every N steps"), 1,
      kMaxSteps)));
  out.push_back(not_hashed(enum_field("debug", "rerun_on", &d.rerun_on,
                                      "Re-execute a step from its kept state when its loss or "
                                      "grad_norm is not finite (nan), spikes (spike), either "
                                      "(both), or never (none)")));
  out.push_back(not_hashed(above(field("debug", "rerun_spike_factor", &d.rerun_spike_factor,
                                       "A spike is a loss above this factor x the mean of the "
                                       "last rerun_window losses"),
                                 1.0, 1e9)));
  out.push_back(not_hashed(at_least(field("debug", "rerun_window", &d.rerun_window,
                                          "Losses in the spike mean (spikes are detected once "
                                          "it is full)"),
                                    1, 100000)));
  out.push_back(not_hashed(at_least(field("debug", "rerun_steps", &d.rerun_steps,
                                          "Steps to re-execute unconditionally, e.g. 100,200"),
                                    1, kMaxSteps)));
  out.push_back(not_hashed(enum_field("debug", "rerun_action", &d.rerun_action,
                                      "After a rerun: stop (exit 1 for nan, else go on), skip "
                                      "(drop the step's update), continue (keep the rerun's "
                                      "result)")));
  out.push_back(not_hashed(at_least(field("debug", "precision_steps", &d.precision_steps,
                                          "Steps executed again in precision_reference beside "
                                          "the run, each op's error reported in "
                                          "<dump_folder>/precision/"),
                                    1, kMaxSteps)));
  out.push_back(not_hashed(enum_field("debug", "precision_reference", &d.precision_reference,
                                      "The dtype a precision step is executed again in "
                                      "(float32 only for bfloat16 runs)")));
  out.push_back(not_hashed(at_least(field("debug", "capture_steps", &d.capture_steps,
                                          "Steps captured before they run (state, batch, "
                                          "machine, op trace) in <dump_folder>/capture/step<N>/, "
                                          "for titan-train replay on another machine or build"),
                                    1, kMaxSteps)));
  out.push_back(enum_field("debug", "cpu_kernels", &d.cpu_kernels,
                           "fused: titan's own CPU kernels (attention, SwiGLU, RMSNorm, AdamW) "
                           "where the CPU has AVX2 and FMA, on AVX-512 where it has that; "
                           "fused_avx2: the same held to AVX2 (same bits, to test or time that "
                           "path); aten: ATen's ops everywhere (they round differently)"));
  out.push_back(hashed_when_changed(
      enum_field("debug", "cpu_linear", &d.cpu_linear,
                 "The library the linear layers' float32 matmuls run on, on the CPU: aten "
                 "(ATen's matmul, on the BLAS libtorch loaded: OpenBLAS) or onednn (oneDNN's "
                 "sgemm, found at run time: libdnnl; faster on small GEMMs, rounds differently)")));
  out.push_back(enum_field("debug", "grad_norm_accumulate", &d.grad_norm_accumulate,
                           "Sum the gradient norm's squares in float32 (PyTorch's "
                           "clip_grad_norm_) or float64 (the exact norm, for reporting and "
                           "clipping)"));
  out.push_back(field("debug", "batch_invariant", &d.batch_invariant,
                      "The same bits on any thread count, number of ranks and micro-batch split "
                      "of the global batch: one sequence per forward and backward, gradients "
                      "summed in a fixed pairwise tree over the global batch's sequences (CPU "
                      "only)"));
  out.push_back(hashed_when_changed(
      field("debug", "moe_force_load_balance", &d.moe_force_load_balance,
            "Route the MoE layers' tokens to experts round-robin (torchtitan's "
            "_debug_force_load_balance), for benchmarks; the gating scores stay the router's")));
  out.push_back(hashed_when_changed(field(
      "debug", "qwen3_moe_load_balancing", &d.qwen3_moe_load_balancing,
      "Update Qwen3-MoE's expert_bias before each optimizer step (auxiliary-loss-free load "
      "balancing), as deepseek_v3 does. Off: as torchtitan v0.2.2, whose qwen3 never updates it")));
  out.push_back(hashed_when_changed(
      field("debug", "moe_bf16_experts", &d.moe_bf16_experts,
            "Compute the routed experts' matmuls in bfloat16 inside a float32 run, as "
            "torchtitan's grouped_mm path (use_grouped_mm, its default) does: to reproduce a "
            "torchtitan run and see the cost in precision attribution")));
}

}  // namespace

void add_run_fields(Config& c, std::vector<FieldSpec>& out) {
  add_parallelism(c, out);
  add_checkpoint(c, out);
  add_activation_checkpoint(c, out);
  add_comm(c, out);
  add_debug(c, out);
}

}  // namespace titan::schema

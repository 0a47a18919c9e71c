// The field table's third part, sections titan-train took over from torchtitan v0.2.2 as they
// are: [profiling], [validation], [validation.dataloader], [compile], [quantize.*],
// [memory_estimation], [fault_tolerance], [experimental].
#include "config/schema_build.h"

namespace titan::schema {
namespace {

constexpr const char* kNoCompiler =
    "titan-train is compiled ahead of time: there is no torch.compile to run";
constexpr const char* kConvertersOnly =
    "read only by model.converters (float8, mx), which titan-train refuses";
constexpr const char* kFaultToleranceOnly =
    "read only by fault_tolerance.enable, which titan-train refuses";

void add_profiling(Config& c, std::vector<FieldSpec>& out) {
  auto& p = c.profiling;
  out.push_back(not_hashed(field("profiling", "enable_profiling", &p.enable_profiling,
                                 "Write a Chrome/Perfetto trace of profiled steps")));
  out.push_back(not_hashed(field("profiling", "save_traces_folder", &p.save_traces_folder,
                                 "Traces' folder in job.dump_folder: "
                                 "iteration_<N>/rank<R>_trace.json")));
  out.push_back(not_hashed(at_least(field("profiling", "profile_freq", &p.profile_freq,
                                          "Profile the steps up to every profile_freq-th"),
                                    1, kMaxSteps)));
  out.push_back(not_hashed(at_least(field("profiling", "profiler_active", &p.profiler_active,
                                          "Steps recorded in each profiled window"),
                                    1, kMaxSteps)));
  out.push_back(not_hashed(at_least(field("profiling", "profiler_warmup", &p.profiler_warmup,
                                          "Steps the profiler runs unrecorded before each "
                                          "window"),
                                    0, kMaxSteps)));
  out.push_back(not_hashed(field("profiling", "enable_memory_snapshot", &p.enable_memory_snapshot,
                                 "Save CUDA's allocator snapshot every profile_freq steps "
                                 "(CUDA only)")));
  out.push_back(
      not_hashed(field("profiling", "save_memory_snapshot_folder", &p.save_memory_snapshot_folder,
                       "Memory snapshots' folder in job.dump_folder")));
}

void add_validation(Config& c, std::vector<FieldSpec>& out) {
  auto& v = c.validation;
  out.push_back(not_hashed(field("validation", "enable", &v.enable,
                                 "Measure the loss on a validation set every freq steps (no "
                                 "gradients; the training bits do not change)")));
  out.push_back(not_hashed(enum_field("validation", "dataset", &v.dataset,
                                      "The validation set (the datasets of training.dataset)")));
  out.push_back(not_hashed(field("validation", "dataset_path", &v.dataset_path,
                                 "File or folder of the validation set")));
  out.push_back(not_hashed(at_least(field("validation", "local_batch_size", &v.local_batch_size,
                                          "Sequences per validation batch on each rank"),
                                    1, static_cast<double>(limits::kMaxLocalBatchSize))));
  out.push_back(not_hashed(
      at_least(field("validation", "seq_len", &v.seq_len, "Tokens per validation sequence"), 1,
               static_cast<double>(limits::kMaxSeqLen))));
  out.push_back(not_hashed(
      at_least(field("validation", "freq", &v.freq, "Validate at step 1 and every freq steps"), 1,
               kMaxSteps)));
  out.push_back(not_hashed(at_least(
      field("validation", "steps", &v.steps, "Batches per validation; -1: the whole set once"), -1,
      kMaxSteps)));
  auto& d = v.dataloader;
  out.push_back(no_effect(at_least(field("validation.dataloader", "num_workers", &d.num_workers,
                                         "Worker processes of the loader"),
                                   0),
                          kNoWorkers));
  out.push_back(no_effect(field("validation.dataloader", "persistent_workers",
                                &d.persistent_workers, "Keep the loader's workers between epochs"),
                          kNoWorkers));
  out.push_back(no_effect(field("validation.dataloader", "pin_memory", &d.pin_memory,
                                "Page-locked host memory for the batches"),
                          "batches are copied to the device as they are; pinning changes only "
                          "the copy's speed"));
  out.push_back(
      no_effect(at_least(field("validation.dataloader", "prefetch_factor", &d.prefetch_factor,
                               "Batches each worker loads ahead; unset: the loader's"),
                         1),
                kNoWorkers));
}

void add_compile(Config& c, std::vector<FieldSpec>& out) {
  auto& k = c.compile;
  out.push_back(
      no_effect(field("compile", "enable", &k.enable, "torch.compile the model"), kNoCompiler));
  out.push_back(no_effect(
      field("compile", "components", &k.components, "What torch.compile compiles: model, loss"),
      kNoCompiler));
  out.push_back(
      no_effect(field("compile", "backend", &k.backend, "torch.compile's backend"), kNoCompiler));
}

void add_quantize(Config& c, std::vector<FieldSpec>& out) {
  auto& q = c.quantize;
  const char* f8 = "quantize.linear.float8";
  out.push_back(
      no_effect(field(f8, "enable_fsdp_float8_all_gather", &q.float8_enable_fsdp_float8_all_gather,
                      "Gather FSDP's parameters in float8"),
                kConvertersOnly));
  out.push_back(no_effect(field(f8, "precompute_float8_dynamic_scale_for_fsdp",
                                &q.float8_precompute_float8_dynamic_scale_for_fsdp,
                                "Compute every float8 scale once after the optimizer step"),
                          kConvertersOnly));
  out.push_back(no_effect(field(f8, "recipe_name", &q.float8_recipe_name,
                                "Float8 scaling recipe (tensorwise, rowwise, rowwise_with_gw_hp); "
                                "empty: none"),
                          kConvertersOnly));
  out.push_back(
      no_effect(field(f8, "filter_fqns", &q.float8_filter_fqns, "Modules left in high precision"),
                kConvertersOnly));
  out.push_back(no_effect(
      field(f8, "emulate", &q.float8_emulate, "Emulate float8 matmuls on GPUs without them"),
      kConvertersOnly));
  const char* mx = "quantize.linear.mx";
  out.push_back(
      no_effect(field(mx, "mxfp8_dim1_cast_kernel_choice", &q.mx_mxfp8_dim1_cast_kernel_choice,
                      "Kernel of MX's dim-1 cast (triton, cuda, torch)"),
                kConvertersOnly));
  out.push_back(
      no_effect(field(mx, "recipe_name", &q.mx_recipe_name, "MX recipe"), kConvertersOnly));
  out.push_back(
      no_effect(field(mx, "filter_fqns", &q.mx_filter_fqns, "Modules left in high precision"),
                kConvertersOnly));
  out.push_back(no_effect(field("quantize.grouped_mm.float8", "fqns", &q.grouped_float8_fqns,
                                "MoE modules whose grouped matmuls run in float8"),
                          kConvertersOnly));
  out.push_back(no_effect(field("quantize.grouped_mm.mx", "recipe_name", &q.grouped_mx_recipe_name,
                                "MX recipe of grouped matmuls"),
                          kConvertersOnly));
  out.push_back(no_effect(field("quantize.grouped_mm.mx", "fqns", &q.grouped_mx_fqns,
                                "MoE modules whose grouped matmuls run in MX"),
                          kConvertersOnly));
}

void add_memory_estimation(Config& c, std::vector<FieldSpec>& out) {
  auto& m = c.memory_estimation;
  out.push_back(no_effect(field("memory_estimation", "enable", &m.enable,
                                "Estimate memory before training (torchtitan's script)"),
                          "titan-train estimates memory at every start and refuses a run that "
                          "cannot fit (the start-up memory check)"));
  out.push_back(no_effect(field("memory_estimation", "disable_fake_mode", &m.disable_fake_mode,
                                "Estimate with real tensors instead of fake ones"),
                          "titan-train's memory check computes from the shapes; it allocates "
                          "nothing"));
}

void add_fault_tolerance(Config& c, std::vector<FieldSpec>& out) {
  auto& f = c.fault_tolerance;
  out.push_back(refused(field("fault_tolerance", "enable", &f.enable,
                              "Fault-tolerant training across replica groups (TorchFT)"),
                        "resume from checkpoints instead: checkpoint.enable (a preempted Slurm "
                        "job saves, requeues and resumes)"));
  out.push_back(no_effect(with_choices(field("fault_tolerance", "process_group", &f.process_group,
                                             "TorchFT's process group"),
                                       {"gloo", "nccl"}),
                          kFaultToleranceOnly));
  out.push_back(no_effect(field("fault_tolerance", "process_group_timeout_ms",
                                &f.process_group_timeout_ms, "TorchFT's collective timeout"),
                          kFaultToleranceOnly));
  out.push_back(
      no_effect(field("fault_tolerance", "replica_id", &f.replica_id, "This replica group's id"),
                kFaultToleranceOnly));
  out.push_back(no_effect(
      field("fault_tolerance", "group_size", &f.group_size, "Replica groups sharing the data"),
      kFaultToleranceOnly));
  out.push_back(no_effect(field("fault_tolerance", "min_replica_size", &f.min_replica_size,
                                "Replica groups needed to keep training"),
                          kFaultToleranceOnly));
  out.push_back(no_effect(field("fault_tolerance", "semi_sync_method", &f.semi_sync_method,
                                "Semi-synchronous training (local_sgd, diloco); empty: none"),
                          kFaultToleranceOnly));
}

void add_experimental(Config& c, std::vector<FieldSpec>& out) {
  auto& e = c.experimental;
  out.push_back(refused(field("experimental", "custom_import", &e.custom_import,
                              "A Python module imported at start (to register models)"),
                        "titan-train has no Python extension modules: leave it empty"));
  out.push_back(refused(field("experimental", "custom_args_module", &e.custom_args_module,
                              "Deprecated torchtitan name of job.custom_config_module"),
                        "titan-train has no Python extension modules: leave it empty"));
}

}  // namespace

void add_torchtitan_fields(Config& c, std::vector<FieldSpec>& out) {
  add_profiling(c, out);
  add_validation(c, out);
  add_compile(c, out);
  add_quantize(c, out);
  add_memory_estimation(c, out);
  add_fault_tolerance(c, out);
  add_experimental(c, out);
}

}  // namespace titan::schema

// What a run trains with: model, data, optimizer, activation checkpointing, the step engine and
// the instruments, built for a RunContext in one constructor, before any output file is touched.
// Building them performs the config's checks that need the model or data (memory, vocabulary,
// dataset files), finds the point the run starts from (loading a checkpoint's model and optimizer
// state) and checks that every rank starts from the same parameters. The TrainState of that
// start point is left for the Trainer to apply.
#pragma once

#include <torch/optim/adamw.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sources.h"
#include "data/step_batches.h"
#include "data/text_encoding.h"
#include "instruments/instrument.h"
#include "instruments/numerics_trace.h"
#include "metrics/fingerprint.h"
#include "model/kernels.h"
#include "model/llama.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/data_parallel_plan.h"
#include "step/step_engine.h"
#include "train/checkpointer.h"
#include "train/run_context.h"

namespace titan {

struct RunParts {
  // Throws ConfigError (exit 2) for what the config, data or a checkpoint refuses, and
  // RuntimeFailure for a damaged checkpoint or ranks that start from different parameters.
  // Writes nothing. Requires: `context` outlives the parts.
  explicit RunParts(const RunContext& context);
  ~RunParts();
  RunParts(const RunParts&) = delete;
  RunParts& operator=(const RunParts&) = delete;

  // What fingerprint.log's header says about this run.
  FingerprintHeader fingerprint_header() const;

  const RunContext& context;
  ModelArgs args;
  BatchPlan plan;
  TextEncoding text;  // how text datasets are tokenized
  std::shared_ptr<const TokenSource> source;
  std::unique_ptr<StepBatches> batches;
  Transformer model{nullptr};
  // Over the whole model's parameters (under FSDP it keeps no state: `parallel` steps the shards).
  std::unique_ptr<torch::optim::AdamW> optimizer;
  DataParallelPlan data_parallel;  // FSDP, HSDP or replication
  std::unique_ptr<DataParallel> parallel;
  ModelKernels kernels;                          // what the model's layers run
  std::vector<std::string> checkpointed_blocks;  // names of the blocks AC wraps
  double token_flops = 0;                        // FLOPs per token (metrics/device_stats.h)
  std::unique_ptr<StepEngine> engine;
  std::shared_ptr<NumericsTracer> tracer;  // null without numerics.log or an armed rerun check
  std::vector<std::shared_ptr<Instrument>> instruments;  // in the order they are called
  std::unique_ptr<Checkpointer> checkpointer;
  StartPoint start;               // where the run starts; its state not yet applied
  uint64_t initial_checksum = 0;  // of the parameters every rank starts from
};

// The model a config trains (its flavor, with training.seq_len and model.dropout).
ModelArgs model_args_for(const Config& config);
// How a context's steps compute (device, autocast, clipping, ranks, batch invariance).
StepOptions step_options_for(const RunContext& context);
// fingerprint.log's header for a run of `context` on `kernels` and `adamw`, its text tokenized by
// `tokenizer` ("" for bytes).
FingerprintHeader fingerprint_header_for(const RunContext& context, const ModelKernels& kernels,
                                         AdamWKernel adamw, const std::string& tokenizer);

}  // namespace titan

// The components a run trains with, each built by its own factory, in the order they depend on:
//
//   plans        the batch plan and the data-parallel plan, from the config and the world
//   data         tokenizer, token source, this rank's step batches (train/training_data.h)
//   model        the module, its kernels, activation checkpointing (train/run_model.h)
//   optimizer    AdamW over the model's parameters (optim/optimizer.h)
//   parallelism  how the ranks share the work (parallel/data_parallel.h); the initialization
//                reaches each rank's rows through it
//   checkpointer what the run starts from, loaded as the parallelism's layout says
//   step engine  the steps, on the parallelism's optimizer (step/step_engine.h)
//   instruments  the debugging tools, the numerics trace among them (instruments/instruments.h)
//
// Building them performs the config's checks that need the model or data (memory, vocabulary,
// dataset files), finds the point the run starts from (loading a checkpoint's model and optimizer
// state) and checks that every rank starts from the same parameters, before any output file is
// touched. The TrainState of that start point is left for the Trainer to apply.
#pragma once

#include <torch/optim/adamw.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "instruments/instrument.h"
#include "metrics/fingerprint.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/data_parallel_plan.h"
#include "step/step_engine.h"
#include "train/checkpointer.h"
#include "train/run_context.h"
#include "train/run_model.h"
#include "train/training_data.h"

namespace titan {

struct RunComponents {
  RunComponents(const RunContext& run_context, BatchPlan batches, DataParallelPlan parallelism)
      : context(run_context), plan(batches), data_parallel(parallelism) {}
  RunComponents(const RunComponents&) = delete;
  RunComponents& operator=(const RunComponents&) = delete;

  const RunContext& context;
  BatchPlan plan;
  DataParallelPlan data_parallel;  // FSDP, HSDP or replication
  TrainingData data;
  RunModel model;
  // Over the whole model's parameters (under FSDP it keeps no state: `parallel` steps the shards).
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<DataParallel> parallel;
  std::unique_ptr<Checkpointer> checkpointer;
  StartPoint start;               // where the run starts; its state not yet applied
  uint64_t initial_checksum = 0;  // of the parameters every rank starts from
  std::unique_ptr<StepEngine> engine;
  std::vector<std::shared_ptr<Instrument>> instruments;  // in the order they are called

  // What fingerprint.log's header says about this run.
  FingerprintHeader fingerprint_header() const;
};

// Builds `context`'s components. Throws ConfigError (exit 2) for what the config, data or a
// checkpoint refuses, and RuntimeFailure for a damaged checkpoint or ranks that start from
// different parameters. Writes nothing. Requires: `context` outlives the components.
std::unique_ptr<RunComponents> build_run_components(const RunContext& context);

// fingerprint.log's header for a run of `context` on `kernels` and `adamw`, its text tokenized by
// `tokenizer` ("" for bytes).
FingerprintHeader fingerprint_header_for(const RunContext& context, const ModelKernels& kernels,
                                         AdamWKernel adamw, const std::string& tokenizer);

}  // namespace titan

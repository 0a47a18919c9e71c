// The model a run trains, built for its config and its data-parallel plan: the module, the
// kernels its layers run, the blocks activation checkpointing wraps, and what a token costs.
#pragma once

#include <string>
#include <vector>

#include "ac/apply.h"
#include "config/config.h"
#include "model/kernels.h"
#include "model/model.h"
#include "parallel/data_parallel_plan.h"
#include "step/step.h"
#include "train/run_context.h"

namespace titan {

struct RunModel {
  ModelArgs args;
  // Shape only under FSDP (the plan's param_memory): its starting values reach the ranks' rows
  // through DataParallel::load_rows.
  Model model{nullptr};
  ModelKernels kernels;                 // what the model's layers run
  ac::CheckpointedBlocks checkpointed;  // the blocks AC wraps, and where their ops go
  double token_flops = 0;               // FLOPs per token (metrics/device_stats.h)
};

// How a context's steps compute (device, autocast, clipping, ranks, batch invariance).
StepOptions step_options_for(const RunContext& context);

// `args`' model on the context's device, in training mode, with the kernels for `options`' steps
// and [activation_checkpoint] applied; its parameters hold memory as `plan` says, and no values
// yet when they do not. Writes nothing.
RunModel build_run_model(const RunContext& context, const ModelArgs& args,
                         const DataParallelPlan& plan, const StepOptions& options);

}  // namespace titan

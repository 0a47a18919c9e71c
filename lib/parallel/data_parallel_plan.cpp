// Contract in data_parallel_plan.h.
#include "parallel/data_parallel_plan.h"

namespace titan {
namespace {

// The first enabled feature that reads or writes the whole model between steps, which FSDP
// does not provide yet; "" for none.
std::string needs_whole_model(const Config& config) {
  if (config.metrics.enable_tensorboard && config.metrics.histogram_freq > 0)
    return "metrics.histogram_freq (histograms of whole weights)";
  return "";
}

}  // namespace

DataParallelPlan data_parallel_plan(const Config& config, int64_t world) {
  const ParallelismConfig& p = config.parallelism;
  DataParallelPlan plan;
  plan.replicate = p.data_parallel_replicate_degree;
  plan.shard = p.data_parallel_shard_degree;
  if (plan.shard == -1) plan.shard = world / plan.replicate;
  if (plan.replicate == -1) plan.replicate = world / plan.shard;
  if (plan.shard <= 1) return plan;
  plan.replicated_because = needs_whole_model(config);
  plan.fsdp = plan.replicated_because.empty();
  return plan;
}

ParamMemory DataParallelPlan::param_memory(const c10::Device& device) const {
  ParamMemory memory;
  memory.shape_only = fsdp;
  memory.device = device;
  return memory;
}

RowShare DataParallelPlan::loaded_rows(int64_t rank) const {
  if (!fsdp) return RowShare();
  return RowShare{rank % shard, shard};
}

}  // namespace titan

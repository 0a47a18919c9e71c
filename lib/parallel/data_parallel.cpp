// Contract in data_parallel.h: the one place that picks the strategy.
#include "parallel/data_parallel.h"

#include "parallel/full_sharding.h"
#include "parallel/replication.h"

namespace titan {

std::unique_ptr<DataParallel> make_data_parallel(
    const DataParallelSetup& setup,
    const std::vector<std::optional<AdamWParamSnapshot>>& resumed_rows) {
  if (setup.plan.fsdp) return std::make_unique<FullSharding>(setup, resumed_rows);
  return std::make_unique<Replication>(setup.model, setup.params, &setup.whole_optimizer,
                                       &setup.world, setup.config.debug.batch_invariant,
                                       setup.plan.replicated_because);
}

std::unique_ptr<DataParallel> one_process(Transformer model, const std::vector<at::Tensor>& params,
                                          torch::optim::AdamW* optimizer) {
  return std::make_unique<Replication>(std::move(model), params, optimizer, nullptr, false);
}

}  // namespace titan

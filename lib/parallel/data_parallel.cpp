// Contract in data_parallel.h: the one place that picks the strategy.
#include "parallel/data_parallel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "parallel/full_sharding.h"
#include "parallel/replication.h"

namespace titan {

std::unique_ptr<DataParallel> make_data_parallel(const DataParallelSetup& setup) {
  if (setup.plan.fsdp) return std::make_unique<FullSharding>(setup);
  return std::make_unique<Replication>(setup.model, setup.params, &setup.whole_optimizer,
                                       &setup.world, setup.config.debug.batch_invariant,
                                       setup.plan.replicated_because);
}

void check_rows_fit(const std::string& name, at::IntArrayRef sizes, int64_t first_row,
                    const at::Tensor& values) {
  if (values.dim() == static_cast<int64_t>(sizes.size()) && values.dim() > 0 && first_row >= 0 &&
      first_row + values.size(0) <= sizes[0] && values.sizes().slice(1) == sizes.slice(1)) {
    return;
  }
  throw std::invalid_argument(
      fmt::format("load_rows: rows {} to {} shaped {} do not fit {} ({})", first_row,
                  first_row + (values.dim() > 0 ? values.size(0) : 0),
                  fmt::join(values.sizes(), "x"), name, fmt::join(sizes, "x")));
}

std::unique_ptr<DataParallel> one_process(Model model, const std::vector<at::Tensor>& params,
                                          torch::optim::AdamW* optimizer) {
  return std::make_unique<Replication>(std::move(model), params, optimizer, nullptr, false);
}

}  // namespace titan

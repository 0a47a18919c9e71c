// Contract in nccl_group.h; the rendezvous, heartbeats and guards are StoreGroup's.
#include "distributed/nccl_group.h"

#include "util/error.h"

#ifdef USE_C10D_NCCL
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "distributed/store_group.h"
#include "util/strings.h"
#endif

namespace titan {

#ifdef USE_C10D_NCCL
namespace {

class NcclGroup : public StoreGroup {
 public:
  NcclGroup(const WorldInfo& world, const CommConfig& comm, const c10::Device& device,
            std::vector<std::string> settings)
      : StoreGroup(world, comm), device_(device), settings_(std::move(settings)) {
    build_backend(timeout());
  }
  NcclGroup(NcclGroup& parent, const std::vector<int64_t>& ranks, const std::string& name)
      : StoreGroup(parent, ranks, name), device_(parent.device_), settings_(parent.settings_) {
    build_backend(timeout());
  }

  std::string backend() const override { return "nccl"; }

  // Only the variables that order the sums: the others do not change a bit.
  std::string numerics_settings() const override {
    std::vector<std::string> ordering{"nccl"};
    for (const auto& s : settings_) {
      if (starts_with(s, "NCCL_ALGO=") || starts_with(s, "NCCL_PROTO=")) {
        ordering.push_back(s.substr(0, s.find(' ')));
      }
    }
    return fmt::format("{}", fmt::join(ordering, " "));
  }

 protected:
  std::unique_ptr<StoreGroup> new_subgroup(const std::vector<int64_t>& ranks,
                                           const std::string& name) override {
    return std::make_unique<NcclGroup>(*this, ranks, name);
  }

  void build_backend(std::chrono::milliseconds timeout) override {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;  // with TORCH_NCCL_BLOCKING_WAIT, wait() throws after it
    auto store = prefixed_store("nccl");
    nccl_ = guarded("building the NCCL group", [&] {
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, static_cast<int>(rank()),
                                                         static_cast<int>(size()), options);
    });
  }

  c10::intrusive_ptr<c10d::Work> all_reduce(std::vector<at::Tensor>& tensors) override {
    return nccl_->allreduce(tensors);
  }

  c10::intrusive_ptr<c10d::Work> all_gather(at::Tensor& full, at::Tensor& shard) override {
    return nccl_->_allgather_base(full, shard);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(at::Tensor& shard, at::Tensor& full) override {
    return nccl_->_reduce_scatter_base(shard, full);
  }

  c10::intrusive_ptr<c10d::Work> all_to_all(at::Tensor& received, at::Tensor& sent) override {
    std::vector<int64_t> equal_splits;  // empty: size() equal blocks
    return nccl_->alltoall_base(received, sent, equal_splits, equal_splits);
  }

  at::Device flag_device() const override { return device_; }

 private:
  c10::Device device_;
  std::vector<std::string> settings_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
};

}  // namespace

bool nccl_compiled_in() { return true; }

std::unique_ptr<ProcessGroup> make_nccl_group(const WorldInfo& world, const CommConfig& comm,
                                              const c10::Device& device,
                                              std::vector<std::string> settings) {
  return std::make_unique<NcclGroup>(world, comm, device, std::move(settings));
}

#else

bool nccl_compiled_in() { return false; }

std::unique_ptr<ProcessGroup> make_nccl_group(const WorldInfo&, const CommConfig&,
                                              const c10::Device&, std::vector<std::string>) {
  throw ConfigError("comm.backend", "this titan-train was built without NCCL",
                    "build against a CUDA libtorch with NCCL (README: building against a CUDA "
                    "libtorch)");
}

#endif

}  // namespace titan

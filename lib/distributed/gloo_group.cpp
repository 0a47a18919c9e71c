// Contract in gloo_group.h; the rendezvous, heartbeats and guards are StoreGroup's.
#include "distributed/gloo_group.h"

#include <cstdlib>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/store_group.h"
#include "util/strings.h"

namespace titan {
namespace {

// Gloo's device: loopback when the store is on this machine's loopback (all traffic stays
// there), the interface GLOO_SOCKET_IFNAME names (as PyTorch honours it), else this host's name.
std::shared_ptr<::gloo::transport::Device> gloo_device(const WorldInfo& w) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (starts_with(w.master_addr, "127.") || w.master_addr == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

class GlooGroup : public StoreGroup {
 public:
  GlooGroup(const WorldInfo& world, const CommConfig& comm) : StoreGroup(world, comm) {
    build_backend(timeout());
  }
  GlooGroup(GlooGroup& parent, const std::vector<int64_t>& ranks, const std::string& name)
      : StoreGroup(parent, ranks, name) {
    build_backend(timeout());
  }

  std::string backend() const override { return "gloo"; }

 protected:
  std::unique_ptr<StoreGroup> new_subgroup(const std::vector<int64_t>& ranks,
                                           const std::string& name) override {
    return std::make_unique<GlooGroup>(*this, ranks, name);
  }

  void build_backend(std::chrono::milliseconds timeout) override {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(gloo_device(world()));
    auto store = prefixed_store("gloo");
    gloo_ = guarded("building the Gloo group", [&] {
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank()),
                                                         static_cast<int>(size()), options);
    });
  }

  c10::intrusive_ptr<c10d::Work> all_reduce(std::vector<at::Tensor>& tensors) override {
    return gloo_->allreduce(tensors);
  }

  c10::intrusive_ptr<c10d::Work> all_gather(at::Tensor& full, at::Tensor& shard) override {
    // An all-gather only moves bytes, and libtorch 1.13's Gloo has no bfloat16: its bits travel
    // as float16's, which Gloo copies without converting.
    const bool bf16 = full.scalar_type() == at::kBFloat16;
    at::Tensor out = bf16 ? full.view(at::kHalf) : full;
    // The rank-sized row blocks of `out` are contiguous views: Gloo writes into them.
    std::vector<std::vector<at::Tensor>> outputs{out.chunk(size(), 0)};
    std::vector<at::Tensor> inputs{bf16 ? shard.view(at::kHalf) : shard};
    return gloo_->allgather(outputs, inputs);
  }

  c10::intrusive_ptr<c10d::Work> send(at::Tensor& tensor, int64_t peer, int tag) override {
    std::vector<at::Tensor> tensors{tensor};
    return gloo_->send(tensors, static_cast<int>(peer), tag);
  }

  c10::intrusive_ptr<c10d::Work> recv(at::Tensor& tensor, int64_t peer, int tag) override {
    std::vector<at::Tensor> tensors{tensor};
    return gloo_->recv(tensors, static_cast<int>(peer), tag);
  }

  at::Device flag_device() const override { return at::kCPU; }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const WorldInfo& world, const CommConfig& comm) {
  return std::make_unique<GlooGroup>(world, comm);
}

}  // namespace titan

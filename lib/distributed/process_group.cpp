#include "distributed/process_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "distributed/gloo_group.h"
#include "distributed/nccl_group.h"
#include "util/error.h"
#include "util/stop_signal.h"
#include "util/strings.h"

namespace titan {
namespace {

class Done : public PendingCollective {
 public:
  void wait() override {}
};

class SingleProcessGroup : public ProcessGroup {
 public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  std::string backend() const override { return "single"; }
  std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor, const std::string&) override {
    return std::make_unique<Done>();
  }
  std::unique_ptr<PendingCollective> start_all_gather(at::Tensor full, at::Tensor shard,
                                                      const std::string&) override {
    check_shard_shapes(full, shard, 1, "all-gather");
    full.copy_(shard);
    return std::make_unique<Done>();
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor shard, at::Tensor full,
                                                              const std::string&) override {
    check_shard_shapes(full, shard, 1, "reduce-scatter");
    shard.copy_(full);
    return std::make_unique<Done>();
  }
  std::unique_ptr<PendingCollective> start_all_to_all(at::Tensor received, at::Tensor sent,
                                                      const std::string&) override {
    check_all_to_all_shapes(received, sent, 1);
    received.copy_(sent);
    return std::make_unique<Done>();
  }
  bool any_rank(bool flag, const std::string&) override { return flag; }
  std::string broadcast(const std::string&, const std::string& value) override { return value; }
  std::vector<std::string> gather(const std::string&, const std::string& value) override {
    return {value};
  }
  void set_timeout(std::chrono::seconds) override {}
  std::unique_ptr<ProcessGroup> subgroup(const std::vector<int64_t>& ranks,
                                         const std::string&) override {
    check_subgroup_ranks(ranks, 0, 1);
    return std::make_unique<SingleProcessGroup>();
  }
};

// NAME=value, set unless the environment has it; "NAME=value (origin)".
std::string set_default_env(const char* name, const char* value) {
  if (const char* user = std::getenv(name); user && *user) {
    return fmt::format("{}={} (kept from the environment)", name, user);
  }
  ::setenv(name, value, 1);
  return fmt::format("{}={} (set by titan-train)", name, value);
}

}  // namespace

void check_shard_shapes(const at::Tensor& full, const at::Tensor& shard, int64_t ranks,
                        const char* collective) {
  const bool ok = full.defined() && shard.defined() && full.dim() >= 1 &&
                  full.dim() == shard.dim() && full.is_contiguous() && shard.is_contiguous() &&
                  full.scalar_type() == shard.scalar_type() && full.device() == shard.device() &&
                  full.size(0) == shard.size(0) * ranks &&
                  full.sizes().slice(1) == shard.sizes().slice(1);
  if (!ok) {
    throw std::invalid_argument(fmt::format(
        "{}: needs a contiguous full tensor of {} x the shard's rows and a contiguous shard of "
        "the same dtype, device and other dims; got full {} and shard {}",
        collective, ranks, full.defined() ? c10::str(full.sizes()) : "undefined",
        shard.defined() ? c10::str(shard.sizes()) : "undefined"));
  }
}

void check_all_to_all_shapes(const at::Tensor& received, const at::Tensor& sent, int64_t ranks) {
  if (!received.defined() || !sent.defined() || received.sizes() != sent.sizes() ||
      received.dim() < 1 || received.size(0) % ranks != 0) {
    throw std::invalid_argument(fmt::format(
        "all-to-all: needs received and sent tensors of one shape whose rows divide by the {} "
        "ranks; got received {} and sent {}",
        ranks, received.defined() ? c10::str(received.sizes()) : "undefined",
        sent.defined() ? c10::str(sent.sizes()) : "undefined"));
  }
  check_shard_shapes(received, sent.narrow(0, 0, sent.size(0) / ranks), ranks, "all-to-all");
}

void check_subgroup_ranks(const std::vector<int64_t>& ranks, int64_t rank, int64_t size) {
  bool ok = !ranks.empty() && std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
  for (size_t i = 0; ok && i < ranks.size(); ++i) {
    ok = ranks[i] >= 0 && ranks[i] < size && (i == 0 || ranks[i - 1] < ranks[i]);
  }
  if (!ok) {
    throw std::invalid_argument(
        fmt::format("a subgroup needs ascending, distinct ranks of a group of {} that include "
                    "rank {}; got [{}]",
                    size, rank, join_integers(ranks, ", ")));
  }
}

GroupBackend choose_backend(CommBackend requested, int64_t world_size, const c10::Device& device,
                            bool nccl_built) {
  const char* key = "comm.backend";
  switch (requested) {
    case CommBackend::kAuto:
      if (world_size == 1) return GroupBackend::kSingle;
      return choose_backend(device.is_cuda() ? CommBackend::kNccl : CommBackend::kGloo, world_size,
                            device, nccl_built);
    case CommBackend::kGloo:
      if (device.is_cuda()) {
        throw ConfigError(key, "\"gloo\" does not sum CUDA tensors in titan-train",
                          "use comm.backend = \"nccl\" (or \"auto\") on CUDA, or "
                          "training.device = \"cpu\"");
      }
      return GroupBackend::kGloo;
    case CommBackend::kNccl:
      if (!device.is_cuda()) {
        throw ConfigError(key, "\"nccl\" needs a CUDA device, and this run trains on the CPU",
                          "use comm.backend = \"gloo\" (or \"auto\") on the CPU");
      }
      if (!nccl_built) {
        throw ConfigError(key, "this titan-train was built without NCCL",
                          "build against a CUDA libtorch with NCCL (README: building against a "
                          "CUDA libtorch)");
      }
      return GroupBackend::kNccl;
  }
  throw std::logic_error("unhandled CommBackend");
}

int64_t cuda_device_for(const WorldInfo& world, int64_t device_count) {
  if (world.local_world_size <= device_count) return world.local_rank;
  if (device_count == 1) return 0;  // the launcher gave each process a device of its own
  throw ConfigError(
      "training.device",
      fmt::format("{} processes on this node (LOCAL_WORLD_SIZE) but this process sees {} CUDA "
                  "devices: two ranks would share one",
                  world.local_world_size, device_count),
      "start at most one process per GPU (torchrun --nproc-per-node, Slurm --ntasks-per-node), "
      "or show each process one GPU of its own (Slurm --gpus-per-task=1)");
}

std::string shared_device_conflict(const std::vector<std::string>& devices) {
  std::map<std::string, size_t> first_rank;
  for (size_t r = 0; r < devices.size(); ++r) {
    auto [it, inserted] = first_rank.emplace(devices[r], r);
    if (!inserted) {
      return fmt::format("ranks {} and {} both train on {}", it->second, r, devices[r]);
    }
  }
  return "";
}

std::vector<std::string> apply_nccl_environment(bool deterministic) {
  std::vector<std::string> settings{set_default_env("TORCH_NCCL_BLOCKING_WAIT", "1")};
  const std::pair<const char*, const char*> ordering[] = {{"NCCL_ALGO", "Ring"},
                                                          {"NCCL_PROTO", "Simple"}};
  for (const auto& [name, value] : ordering) {
    const char* user = std::getenv(name);
    if (deterministic || (user && *user)) settings.push_back(set_default_env(name, value));
  }
  return settings;
}

std::vector<std::string> apply_flight_recorder_environment(const CommConfig& comm,
                                                           const std::string& dump_file) {
  if (comm.trace_buf_size <= 0) return {};
  return {set_default_env("TORCH_FR_BUFFER_SIZE", std::to_string(comm.trace_buf_size).c_str()),
          set_default_env("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"),
          set_default_env("TORCH_FR_DUMP_TEMP_FILE", dump_file.c_str())};
}

std::unique_ptr<ProcessGroup> make_process_group(const WorldInfo& world, const CommConfig& comm,
                                                 GroupBackend backend, const c10::Device& device,
                                                 bool deterministic,
                                                 const std::string& flight_recorder_file) {
  switch (backend) {
    case GroupBackend::kSingle:
      return std::make_unique<SingleProcessGroup>();
    case GroupBackend::kGloo:
      return make_gloo_group(world, comm);
    case GroupBackend::kNccl: {
      std::vector<std::string> settings = apply_nccl_environment(deterministic);
      for (auto& s : apply_flight_recorder_environment(comm, flight_recorder_file))
        settings.push_back(std::move(s));
      return make_nccl_group(world, comm, device, settings);
    }
  }
  throw std::logic_error("unhandled GroupBackend");
}

namespace {

void append_part(std::string& out, const std::string& part) {
  out += std::to_string(part.size()) + ":" + part;
}

std::string take_part(const std::string& in, size_t& at) {
  const size_t colon = in.find(':', at);
  if (colon == std::string::npos) throw std::invalid_argument("refusal: no length");
  const size_t n = std::stoul(in.substr(at, colon - at));
  if (colon + 1 + n > in.size()) throw std::invalid_argument("refusal: cut short");
  at = colon + 1 + n;
  return in.substr(colon + 1, n);
}

}  // namespace

std::optional<RankRefusal> share_rank0_refusal(ProcessGroup& group, const std::string& key,
                                               const std::optional<RankRefusal>& rank0) {
  std::string encoded;
  if (group.rank() == 0 && rank0) {
    encoded = "refusal ";
    append_part(encoded, rank0->where);
    append_part(encoded, rank0->message);
    append_part(encoded, rank0->hint);
  }
  if (group.size() > 1) encoded = group.broadcast(key, encoded);
  if (encoded.empty()) return std::nullopt;
  size_t at = std::string("refusal ").size();
  RankRefusal r;
  r.where = take_part(encoded, at);
  r.message = take_part(encoded, at);
  r.hint = take_part(encoded, at);
  return r;
}

int agreed_stop_signal(ProcessGroup& group, const std::string& what) {
  const int signal = pending_stop_signal();
  if (group.size() > 1 && group.any_rank(signal != 0, what) && signal == 0) return SIGTERM;
  return signal;
}

}  // namespace titan

// The processes of one run and the collectives between them.
//
// One process: a group of one, every collective the identity. Several (WorldInfo.world_size > 1):
// a c10d group, Gloo on CPU and NCCL on CUDA (comm.backend), whose rank 0 serves the rendezvous
// store (c10d::TCPStore) at MASTER_ADDR:MASTER_PORT. Every collective is guarded: when a rank dies
// or stops answering, the others throw RuntimeFailure naming it (from heartbeats each rank keeps in
// the store) within the timeout, instead of hanging.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "distributed/world.h"

namespace titan {

// A collective in flight; wait() returns once its result is in place (or throws like the
// collective would).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  // "gloo", "nccl" or "single".
  virtual std::string backend() const = 0;
  // For fingerprint.log's header, what decides how the backend orders its sums:
  // "nccl NCCL_ALGO=Ring NCCL_PROTO=Simple", or "nccl" when NCCL chooses; "" for the Gloo and
  // single-process groups (their sums are fixed by the rank order).
  virtual std::string numerics_settings() const { return ""; }

  // Starts summing `tensor` over the ranks, in place; `what` names the collective in errors
  // ("the gradient all-reduce of step 3"). Requires: every rank calls it with tensors of the same
  // shape and dtype, in the same order; the tensor is not touched until wait() returned.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor tensor,
                                                                  const std::string& what) = 0;
  // Blocking sum over the ranks, in place.
  void all_reduce_sum(at::Tensor tensor, const std::string& what) {
    start_all_reduce_sum(std::move(tensor), what)->wait();
  }
  // FSDP's two collectives, on tensors split by rank along dim 0: rank r owns rows
  // [r * n, (r + 1) * n) of `full`, n = shard.size(0). Both require: full and shard contiguous,
  // of one dtype and device, full.size(0) == n * size() with the other dims equal, the same
  // shapes on every rank, in the same order; neither tensor touched until wait() returned.
  // (check_shard_shapes throws std::invalid_argument otherwise.)
  //
  // start_all_gather: every rank's `shard` into its rows of `full`, on every rank.
  virtual std::unique_ptr<PendingCollective> start_all_gather(at::Tensor full, at::Tensor shard,
                                                              const std::string& what) = 0;
  // start_reduce_scatter_sum: `full` summed over the ranks, this rank's rows of the sum into
  // `shard`; `full` is scratch afterwards. On Gloo (libtorch 1.13's has no reduce-scatter) it
  // is a ring of send/recv that completes before it returns: in size() - 1 steps each rank
  // passes one row block, summed so far, to the next rank, so it moves what a reduce-scatter
  // moves, (size() - 1) / size() of `full`, half of an all-reduce. Rank r's rows are summed in
  // ring order: ((full of rank r+1) + full of rank r+2) + ... + full of rank r, indices modulo
  // size(). NCCL runs its own reduce-scatter, which orders its sums as NCCL chooses.
  virtual std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor shard,
                                                                      at::Tensor full,
                                                                      const std::string& what) = 0;

  // start_all_to_all: block r of `sent` (its rows [r * n, (r + 1) * n), n = sent.size(0) /
  // size()) to rank r, and into block q of `received` rank q's block for this rank, bits
  // unchanged (nothing is summed). Requires: both contiguous, of one shape, dtype and device,
  // the rows a multiple of size(), the same on every rank, in the same order; neither touched
  // until wait() returned (check_all_to_all_shapes). On Gloo it is size() - 1 rounds of
  // send/recv that complete before it returns; NCCL runs its own.
  virtual std::unique_ptr<PendingCollective> start_all_to_all(at::Tensor received, at::Tensor sent,
                                                              const std::string& what) = 0;

  // True when `flag` is true on any rank (every rank must call it).
  virtual bool any_rank(bool flag, const std::string& what) = 0;

  // Small byte strings through the store, `key` unique per exchange. broadcast: every rank gets
  // rank 0's `value` (others pass anything). gather: rank 0 gets every rank's value, by rank;
  // other ranks get an empty vector.
  virtual std::string broadcast(const std::string& key, const std::string& value) = 0;
  virtual std::vector<std::string> gather(const std::string& key, const std::string& value) = 0;

  // Collectives from now on wait at most `timeout` for the other ranks (comm's train timeout
  // after step 1; the init timeout before). The subgroups of this group follow.
  virtual void set_timeout(std::chrono::seconds timeout) = 0;

  // The group of `ranks` of this group (ascending, distinct, this rank among them), of the same
  // backend, for collectives among them only (HSDP's shard and replica groups): its rank() is
  // this rank's index in `ranks`. Requires: every member passes the same ranks and a `name`
  // unique among this group's subgroups, and every rank of this group joins its subgroups in
  // one order (a member blocks until the others arrive). A subgroup fails as this group does,
  // naming ranks as this group numbers them, and follows this group's set_timeout. Throws
  // std::invalid_argument for ranks that break the requirement.
  virtual std::unique_ptr<ProcessGroup> subgroup(const std::vector<int64_t>& ranks,
                                                 const std::string& name) = 0;
};

// Throws std::invalid_argument unless `ranks` are ascending, distinct ranks of a group of
// `size` that include `rank`.
void check_subgroup_ranks(const std::vector<int64_t>& ranks, int64_t rank, int64_t size);

// Throws std::invalid_argument naming `collective` unless `full` and `shard` are what
// start_all_gather and start_reduce_scatter_sum require of them for a group of `ranks`.
void check_shard_shapes(const at::Tensor& full, const at::Tensor& shard, int64_t ranks,
                        const char* collective);
// Throws std::invalid_argument unless start_all_to_all's requirements on the shapes hold.
void check_all_to_all_shapes(const at::Tensor& received, const at::Tensor& sent, int64_t ranks);

// A refusal one rank met, carried to the others as a typed message: a ConfigError's three parts.
struct RankRefusal {
  std::string where, message, hint;
};

// Rank 0's refusal (`rank0`, ignored on other ranks), or none, on every rank: through the store
// under `key`, each part length-prefixed (newlines and any bytes survive). Every rank must call it
// with the same key.
std::optional<RankRefusal> share_rank0_refusal(ProcessGroup& group, const std::string& key,
                                               const std::optional<RankRefusal>& rank0);

// Which group a run's processes form.
enum class GroupBackend { kSingle, kGloo, kNccl };

// Whether this build has c10d's NCCL process group (a CUDA libtorch built with NCCL).
bool nccl_compiled_in();

// comm.backend resolved for `world_size` processes training on `device`. "auto": one process
// needs no group (kSingle); several use NCCL on CUDA and Gloo on CPU. "gloo" and "nccl" build that
// group even for one process, which then meets only itself: a check of the backend's path.
// Throws ConfigError naming comm.backend for nccl without a CUDA device or without NCCL in this
// build (`nccl_built`), and for gloo with a CUDA device.
GroupBackend choose_backend(CommBackend requested, int64_t world_size, const c10::Device& device,
                            bool nccl_built);

// The CUDA device index of this process among the `device_count` it sees: LOCAL_RANK when every
// local rank has a device of its own, device 0 when the launcher shows each process one device
// (Slurm's --gpus-per-task, CUDA_VISIBLE_DEVICES per process). Throws ConfigError naming
// training.device when the local ranks outnumber the devices (two would share one).
int64_t cuda_device_for(const WorldInfo& world, int64_t device_count);

// Ranks sharing one device: `devices` holds each rank's "host/device id" (by rank). Returns a
// message naming the first pair that shares one, or "" when every rank has its own.
std::string shared_device_conflict(const std::vector<std::string>& devices);

// NCCL's environment for a group: TORCH_NCCL_BLOCKING_WAIT=1 (collectives time out into errors
// naming the rank gone, instead of the watchdog ending the process), and with `deterministic`
// NCCL_ALGO=Ring and NCCL_PROTO=Simple (a fixed reduction order from run to run on the same
// machines). A variable the user set is kept. Returns "NAME=value (set by titan-train | kept from
// the environment)" for each, in that order; NCCL_ALGO and NCCL_PROTO also without
// `deterministic` when the user set them (they order the sums).
std::vector<std::string> apply_nccl_environment(bool deterministic);

// NCCL's flight recorder as comm.trace_buf_size asks (torchtitan's): TORCH_FR_BUFFER_SIZE, and
// with a buffer TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_FR_DUMP_TEMP_FILE=`dump_file` (the
// prefix of each rank's dump, in the run folder's comm traces folder). Variables the user set
// are kept. Returns their descriptions as apply_nccl_environment does; none with a 0 buffer.
std::vector<std::string> apply_flight_recorder_environment(const CommConfig& comm,
                                                           const std::string& dump_file);

// The group `world` describes for `backend` (see choose_backend): a single-process group, or a
// Gloo or NCCL group after the rendezvous (every rank arrives within comm.init_timeout_seconds,
// else RuntimeFailure naming those that did not). An NCCL group works on `device` and applies
// apply_nccl_environment(deterministic) and apply_flight_recorder_environment(comm,
// `flight_recorder_file`) first. Logs nothing. Throws ConfigError for a group this build cannot
// make.
std::unique_ptr<ProcessGroup> make_process_group(const WorldInfo& world, const CommConfig& comm,
                                                 GroupBackend backend, const c10::Device& device,
                                                 bool deterministic,
                                                 const std::string& flight_recorder_file = "");

// The stop signal the ranks agree on at the stop check `what` (a collective: every rank calls
// it at the same point): this rank's pending one (util/stop_signal.h), SIGTERM when only other
// ranks received one, 0 when none did. So ranks stop together even when a signal reached some.
int agreed_stop_signal(ProcessGroup& group, const std::string& what);

}  // namespace titan

// The part of a multi-process group that goes through the rendezvous store (internal to
// lib/distributed): the rendezvous itself, heartbeats and the naming of ranks that are gone,
// the small exchanges (broadcast, gather) and the guard around every collective. The collectives
// are the backend's: GlooGroup (gloo_group.cpp) and NcclGroup (nccl_group.cpp) derive from it.
//
// Failure diagnosis: each rank bumps its counter "heartbeat/<rank>" in the store twice a second
// from a thread of its own (with its own store connection); when a collective or store call
// fails, the rank watches the counters for a moment and names those that stopped. Rank 0 serves
// the store, so when the store itself is gone, rank 0 is.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "distributed/process_group.h"
#include "util/error.h"

namespace titan {

class Heartbeat;

class StoreGroup : public ProcessGroup {
 public:
  // Serves (rank 0) or connects to the store at world.master_addr:master_port, waits until every
  // rank arrived, and starts the heartbeat. Throws RuntimeFailure naming the ranks that did not
  // arrive within comm.init_timeout_seconds, or rank 0 when its store cannot be reached;
  // ConfigError when two processes claim one rank (both stop) or the ranks disagree on the world;
  // StoppedBySignal when SIGTERM or SIGINT arrives while it waits (checked about once a second).
  StoreGroup(const WorldInfo& world, const CommConfig& comm);
  ~StoreGroup() override;

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor tensor,
                                                          const std::string& what) override;
  std::unique_ptr<PendingCollective> start_all_gather(at::Tensor full, at::Tensor shard,
                                                      const std::string& what) override;
  std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor shard, at::Tensor full,
                                                              const std::string& what) override;
  std::unique_ptr<PendingCollective> start_all_to_all(at::Tensor received, at::Tensor sent,
                                                      const std::string& what) override;
  bool any_rank(bool flag, const std::string& what) override;
  std::string broadcast(const std::string& key, const std::string& value) override;
  std::vector<std::string> gather(const std::string& key, const std::string& value) override;
  void set_timeout(std::chrono::seconds timeout) override;
  std::unique_ptr<ProcessGroup> subgroup(const std::vector<int64_t>& ranks,
                                         const std::string& name) override;

  // Runs fn(); any failure becomes a RuntimeFailure naming `what` and the rank(s) gone.
  template <class Fn>
  auto guarded(const std::string& what, Fn fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const RuntimeFailure&) {
      throw;
    } catch (const std::exception& e) {
      throw collective_failure(what, e);
    }
  }

 protected:
  // A subgroup's part (see ProcessGroup::subgroup): `parent`'s store and heartbeats, its key
  // space "sub/<name>/" in the store, `ranks` numbered as the parent numbers them. The parent's
  // set_timeout rebuilds the subgroup's backend too. The backend's constructor calls
  // build_backend after it.
  StoreGroup(StoreGroup& parent, const std::vector<int64_t>& ranks, const std::string& name);
  // The backend's subgroup: its subgroup constructor (above, then build_backend).
  virtual std::unique_ptr<StoreGroup> new_subgroup(const std::vector<int64_t>& ranks,
                                                   const std::string& name) = 0;

  // A fresh key space of the store for the backend's next group ("gloo/0", "nccl/1", ...).
  c10::intrusive_ptr<c10d::Store> prefixed_store(const std::string& backend);
  std::chrono::milliseconds timeout() const { return timeout_; }
  const WorldInfo& world() const { return world_; }

  // The backend's group, built (again, after set_timeout) by every rank together with
  // `timeout` for its collectives. Subclass constructors call it once.
  virtual void build_backend(std::chrono::milliseconds timeout) = 0;
  // Starts an in-place sum of `tensors` over the ranks.
  virtual c10::intrusive_ptr<c10d::Work> all_reduce(std::vector<at::Tensor>& tensors) = 0;
  // Starts start_all_gather's gather (shapes checked already).
  virtual c10::intrusive_ptr<c10d::Work> all_gather(at::Tensor& full, at::Tensor& shard) = 0;
  // Starts a reduce-scatter into `shard` when the backend has one; nullptr when it has not, and
  // start_reduce_scatter_sum runs a ring of send/recv instead (Gloo).
  virtual c10::intrusive_ptr<c10d::Work> reduce_scatter(at::Tensor& shard, at::Tensor& full) {
    return {};
  }
  // Starts start_all_to_all's exchange when the backend has one (shapes checked already);
  // nullptr when it has not, and start_all_to_all runs rounds of send/recv instead (Gloo).
  virtual c10::intrusive_ptr<c10d::Work> all_to_all(at::Tensor& received, at::Tensor& sent) {
    return {};
  }
  // Point-to-point, for that ring and those rounds: `tensor` (contiguous) to or from rank `peer` of
  // this group, matched by `tag`. Backends with a reduce-scatter need not have them.
  virtual c10::intrusive_ptr<c10d::Work> send(at::Tensor& tensor, int64_t peer, int tag);
  virtual c10::intrusive_ptr<c10d::Work> recv(at::Tensor& tensor, int64_t peer, int tag);
  // Where any_rank's flag lives (the backend's device).
  virtual at::Device flag_device() const = 0;

 private:
  RuntimeFailure collective_failure(const std::string& what, const std::exception& e);
  // start_reduce_scatter_sum without a backend reduce-scatter: size() - 1 steps in which each
  // rank passes one row block of `full`, summed so far, to the next rank and adds the block the
  // previous one passed it, so that rank r ends with block r summed over every rank (in ring
  // order, starting after r) and copies it into `shard`. Each rank moves (size() - 1) / size()
  // of `full`, as a reduce-scatter does; `full` is the running sum. Blocks until done.
  void ring_reduce_scatter(at::Tensor& shard, at::Tensor& full);
  // start_all_to_all without a backend all-to-all: in round k (1 .. size() - 1) each rank sends
  // its block for rank + k and receives the block of rank - k (modulo size()). Blocks until done.
  void pairwise_all_to_all(at::Tensor& received, at::Tensor& sent);
  // The tag of the next ring or rounds (both sides count alike).
  int next_tag();
  std::string where() const;
  c10::intrusive_ptr<c10d::TCPStore> open_store();
  // Rank 0 that cannot take the rendezvous mark (or bind the port): throws duplicate_rank() when
  // another titan-train rank 0 on this machine holds the mark for the port (after adding to its
  // claim count, so that it stops too), else returns.
  void refuse_if_rank0_already_serves();
  ConfigError duplicate_rank() const;
  // Throws StoppedBySignal "stopped by SIGTERM during the rendezvous" once one arrived.
  void stop_if_signalled() const;
  void wait_for_all_ranks();
  std::vector<int64_t> read_heartbeats();
  std::string diagnose();
  // The value at `stored` (a full store key) that rank `writer` of this group sets. Unless the
  // writer is the job's rank 0 (the store's server), waited for in short polls: throws (for
  // guarded to diagnose) once the writer's heartbeat has stood still for a few seconds, or when
  // the timeout passes, so that a rank gone before it wrote is named within seconds rather than
  // after comm.train_timeout_seconds.
  std::string await_value(const std::string& stored, int64_t writer);

  WorldInfo world_;  // the whole job's: messages name ranks by it
  int64_t rank_;     // in this group
  int64_t size_;
  std::vector<int64_t> world_ranks_;  // by rank in this group
  std::string key_space_;             // "" for the job's group, "sub/<name>/" for a subgroup
  // The live subgroups of the job's group, for its set_timeout (shared: either may go first).
  std::shared_ptr<std::vector<StoreGroup*>> subgroups_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::unique_ptr<Heartbeat> heartbeat_;
  int generation_ = 0;
  int ring_tag_ = 0;      // one tag per ring reduce-scatter: its steps run one after another
  int server_mark_ = -1;  // rank 0: mark_rendezvous_server's descriptor
};

}  // namespace titan

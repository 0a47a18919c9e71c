// The processes of one run and the collectives between them.
//
// One process: a group of one, every collective the identity. Several (WorldInfo.world_size > 1):
// a c10d group, Gloo on CPU, whose rank 0 serves the rendezvous store (c10d::TCPStore) at
// MASTER_ADDR:MASTER_PORT. Every collective is guarded: when a rank dies or stops answering,
// the others throw RuntimeFailure naming it (from heartbeats each rank keeps in the store) within
// the timeout, instead of hanging.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <memory>
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
  // "gloo" or "single".
  virtual std::string backend() const = 0;

  // Starts summing `tensor` over the ranks, in place; `what` names the collective in errors
  // ("the gradient all-reduce of step 3"). Requires: every rank calls it with tensors of the same
  // shape and dtype, in the same order; the tensor is not touched until wait() returned.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor tensor,
                                                                  const std::string& what) = 0;
  // Blocking sum over the ranks, in place.
  void all_reduce_sum(at::Tensor tensor, const std::string& what) {
    start_all_reduce_sum(std::move(tensor), what)->wait();
  }
  // True when `flag` is true on any rank (every rank must call it).
  virtual bool any_rank(bool flag, const std::string& what) = 0;

  // Small byte strings through the store, `key` unique per exchange. broadcast: every rank gets
  // rank 0's `value` (others pass anything). gather: rank 0 gets every rank's value, by rank;
  // other ranks get an empty vector.
  virtual std::string broadcast(const std::string& key, const std::string& value) = 0;
  virtual std::vector<std::string> gather(const std::string& key, const std::string& value) = 0;

  // Collectives from now on wait at most `timeout` for the other ranks (comm's train timeout
  // after step 1; the init timeout before).
  virtual void set_timeout(std::chrono::seconds timeout) = 0;
};

// The group `world` describes: a single-process group, or a Gloo group after the rendezvous
// (every rank arrives within comm.init_timeout_seconds, else RuntimeFailure naming those that
// did not). Logs nothing. Throws ConfigError for a world this build cannot join (CUDA, or a
// libtorch without Gloo).
std::unique_ptr<ProcessGroup> make_process_group(const WorldInfo& world, const CommConfig& comm);

}  // namespace titan

// Several titan-train processes on this machine, started with torchrun's variables, as the
// ranks of one run over Gloo on loopback.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace titan::test {

// torchrun's variables for rank `rank` of `world` on this machine.
std::string rank_env(int rank, int world, int port);

// `world` copies of `args`.
std::vector<std::string> same_args(int world, const std::string& args);

struct RankResult {
  int exit_code = -1;
  std::string output;
};

// Runs one process per entry of `args` (rank = index) and waits for all (each at most 300 s).
// Their output goes to <dir>/rank<N>.out.
std::vector<RankResult> run_ranks(const std::string& dir, const std::vector<std::string>& args);

// Raw uint16 tokens below the tiny model's vocabulary (512), from generator `seed`, written to
// dir/tokens.bin for the tokens dataset, which cuts them into (seq_len + 1)-token documents: rank
// r of W reads documents r, r + W, ..., so W ranks x b sequences see in a step the documents of
// 1 rank x Wb. Returns the path.
std::string write_rank_tokens(const std::string& dir, unsigned seed = 7);

// Flags for the tokens dataset (write_rank_tokens, seed 11) written into `dir`.
std::string tokens_dataset(const std::string& dir);

// `world` ranks (one: a plain process) of a tiny run of `steps` in dir/name (test::tiny_run with
// `extra`); requires every rank to exit 0 (Catch's REQUIRE) and returns rank 0's output.
std::string train_ranks(const std::string& dir, const std::string& name, int world,
                        const std::string& extra, int steps = 4);

// The data-parallel degrees of a replicated run, and of HSDP over 4 ranks (2 replicas of 2
// shards); a run without either is FSDP over all its ranks.
inline const char* const kReplicate =
    " --parallelism.data_parallel_shard_degree 1 --parallelism.data_parallel_replicate_degree -1";
inline const char* const kHsdp = " --parallelism.data_parallel_replicate_degree 2";

// What one rank computed: the tensors the test asserts on, in the main thread (Catch's
// assertions are not thread-safe).
using RankOutputs = std::vector<at::Tensor>;

// Runs body(group) on each rank of a `world`-rank Gloo group on loopback, one thread a rank in
// this process, and returns each rank's outputs by rank; rethrows the first rank's exception.
std::vector<RankOutputs> on_gloo_ranks(int64_t world,
                                       const std::function<RankOutputs(ProcessGroup&)>& body);

}  // namespace titan::test

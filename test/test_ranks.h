// Several titan-train processes on this machine, started with torchrun's variables, as the
// ranks of one run over Gloo on loopback.
#pragma once

#include <string>
#include <vector>

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

}  // namespace titan::test

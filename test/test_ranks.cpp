#include "test_ranks.h"

#include "test_util.h"

namespace titan::test {

std::string rank_env(int rank, int world, int port) {
  return "RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
         " LOCAL_RANK=" + std::to_string(rank) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
}

std::vector<std::string> same_args(int world, const std::string& args) {
  return std::vector<std::string>(static_cast<size_t>(world), args);
}

std::vector<RankResult> run_ranks(const std::string& dir, const std::vector<std::string>& args) {
  const int world = static_cast<int>(args.size());
  const int port = free_port();
  std::string script;
  for (int r = 0; r < world; ++r) {
    const std::string out = dir + "/rank" + std::to_string(r);
    script += "(env " + rank_env(r, world, port) + " timeout 300 " + binary() + " " + args[r] +
              " >" + out + ".out 2>&1; echo $? >" + out + ".rc) & ";
  }
  run_shell(script + "wait");
  std::vector<RankResult> results;
  for (int r = 0; r < world; ++r) {
    const std::string out = dir + "/rank" + std::to_string(r);
    results.push_back({std::stoi(read_text(out + ".rc")), read_text(out + ".out")});
  }
  return results;
}

}  // namespace titan::test

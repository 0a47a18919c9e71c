#include "test_ranks.h"

#include <pthread.h>

#include <csignal>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "catch_torch.h"
#include "distributed/world.h"
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

std::string tokens_dataset(const std::string& dir) {
  return " --training.dataset tokens --training.dataset_path " + write_rank_tokens(dir, 11);
}

std::string train_ranks(const std::string& dir, const std::string& name, int world,
                        const std::string& extra, int steps) {
  const std::string run = dir + "/" + name;
  const std::string flags = tiny_run(run, steps, extra);
  if (world == 1) {
    const auto one = run_titan(flags);
    INFO(name << ":\n" << one.output);
    REQUIRE(one.exit_code == 0);
    return one.output;
  }
  std::filesystem::create_directories(run + "_out");
  const auto ranks = run_ranks(run + "_out", same_args(world, flags));
  for (const auto& rank : ranks) {
    INFO(name << ":\n" << rank.output);
    REQUIRE(rank.exit_code == 0);
  }
  return ranks[0].output;
}

std::string write_rank_tokens(const std::string& dir, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<uint16_t> tokens(20000);
  for (auto& t : tokens) t = static_cast<uint16_t>(gen() % 512);
  const std::string path = dir + "/tokens.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  return path;
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

std::vector<RankOutputs> on_gloo_ranks(int64_t world,
                                       const std::function<RankOutputs(ProcessGroup&)>& body) {
  const int port = free_port();
  std::vector<RankOutputs> outputs(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      // A rank that writes to the socket of one that left gets EPIPE, as titan-train's ranks
      // do (they ignore SIGPIPE), instead of SIGPIPE ending the whole test process. Blocked in
      // this thread, and so in the Gloo and store threads it starts; not in the processes that
      // tests start, which fork from the main thread.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      try {
        WorldInfo w;
        w.rank = w.local_rank = r;
        w.world_size = w.local_world_size = world;
        w.master_addr = "127.0.0.1";
        w.master_port = port;
        CommConfig comm;
        comm.init_timeout_seconds = 60;
        auto group =
            make_process_group(w, comm, GroupBackend::kGloo, c10::Device(c10::kCPU), false);
        outputs[r] = body(*group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return outputs;
}

}  // namespace titan::test

// Hostile runs of several processes (issue 41, classes 1-3 and the duplicated RANK): ranks that
// differ in a key outside the config hash, a signal while the ranks meet, a world larger than the
// rendezvous can hold, two processes that both claim one rank. Each through the real binary.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "catch_torch.h"
#include "test_ranks.h"
#include "test_util.h"

using namespace titan;

namespace {

// Starts `rank` of a `world`-process world on `port` in the background (a shell fragment), its
// output and exit code going to <dir>/rank<N>.{out,rc}: for starts run_ranks cannot express (one
// rank alone, two processes as one rank).
std::string start_rank(const std::string& dir, int port, int rank, const std::string& args,
                       int world = 2) {
  return fmt::format(
      "(env {0} timeout 120 {1} {2} >{3}/rank{4}.out 2>&1; echo $? >{3}/rank{4}.rc) & ",
      test::rank_env(rank, world, port), test::binary(), args, dir, rank);
}

test::RankResult rank_result(const std::string& dir, int rank) {
  return {std::stoi(test::read_text(fmt::format("{}/rank{}.rc", dir, rank))),
          test::read_text(fmt::format("{}/rank{}.out", dir, rank))};
}

// Tiny-model flags for a 2-rank run into <dir>/run with short timeouts, `extra` appended.
std::string rank_args(const std::string& dir, const std::string& extra) {
  return test::tiny_run(dir + "/run", 2,
                        "--comm.init_timeout_seconds 20 --comm.train_timeout_seconds 8 " + extra);
}

}  // namespace

TEST_CASE(
    "hostile ranks: ranks that differ in a key outside the config hash that decides their "
    "collectives or files stop at the rendezvous with exit 2, naming the key",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_rank_keys");
  // Each pair: what rank 1 adds to the flags both ranks share.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--metrics.enable_tensorboard --metrics.save_for_all_ranks",
       "metrics.save_for_all_ranks false -> true"},
      {"--metrics.log_freq 2", "metrics.log_freq 10 -> 2"},
      {"--debug.rerun_steps 1", "debug.rerun_steps"},
      {"--checkpoint.enable", "checkpoint.enable false -> true"},
      {"--job.dump_folder " + dir + "/other", "job.dump_folder"},
  };
  for (const auto& [extra, named] : cases) {
    const auto results =
        test::run_ranks(dir, {rank_args(dir, "--metrics.enable_tensorboard"),
                              rank_args(dir, "--metrics.enable_tensorboard " + extra)});
    for (int r = 0; r < 2; ++r) {
      const test::RankResult& result = results[r];
      INFO(extra << "\nrank " << r << ": " << result.output);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.output, Catch::Contains("the ranks were started with different configs") &&
                                    Catch::Contains(named));
      CHECK_THAT(result.output, !Catch::Contains("gone"));
    }
  }
  // A key each process may set for itself: the run trains.
  const auto results = test::run_ranks(dir, {rank_args(dir, "--training.cpu_threads 1"),
                                             rank_args(dir, "--training.cpu_threads 2")});
  for (int r = 0; r < 2; ++r) {
    const test::RankResult& result = results[r];
    INFO("rank " << r << ": " << result.output);
    CHECK(result.exit_code == 0);
  }
}

TEST_CASE(
    "hostile ranks: SIGTERM or SIGINT while a rank waits at the rendezvous stops it at once "
    "with 143 or 130",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_rank_signal");
  // Rank 0 waits for a rank 1 that never comes (it serves the store); rank 1 waits for a rank 0
  // that never comes (it retries connecting). The timeout (20 s) is far off when the signal lands.
  for (const auto& [rank, signal, code] :
       std::vector<std::tuple<int, std::string, int>>{{0, "TERM", 143}, {1, "INT", 130}}) {
    const int port = test::free_port();
    const auto r = test::run_shell(
        start_rank(dir, port, rank, rank_args(dir, "")) +
        // The rank says it is at the rendezvous before it waits there. The pattern is anchored
        // at the binary: the shells and `timeout` carry the same words.
        fmt::format("for i in $(seq 1200); do grep -q 'joining the rendezvous' {2}/rank{3}.out "
                    "2>/dev/null && break; sleep 0.1; done; "
                    "pkill -{0} -f '^{1} .*job.dump_folder {2}/run'; "
                    "start=$(date +%s); wait; echo waited=$(( $(date +%s) - start ))",
                    signal, test::binary(), dir, rank));
    const test::RankResult result = rank_result(dir, rank);
    INFO("rank " << rank << ": " << result.output << r.output);
    CHECK(result.exit_code == code);
    CHECK_THAT(result.output,
               Catch::Contains(fmt::format("stopped by SIG{} during the rendezvous", signal)));
    // At once: the wait polls for a signal every second (whole seconds measured, a loaded
    // machine allowed one more).
    CHECK_THAT(r.output, Catch::Contains("waited=0") || Catch::Contains("waited=1") ||
                             Catch::Contains("waited=2") || Catch::Contains("waited=3"));
  }
}

TEST_CASE(
    "hostile ranks: a world larger than the rendezvous holds is exit 2 at once, before any "
    "output",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_rank_world");
  for (const char* world : {"99999999999", "1048577"}) {
    const auto r = test::run_titan_bounded(
        test::tiny_run(dir + "/run", 1),
        fmt::format("RANK=0 WORLD_SIZE={} MASTER_ADDR=127.0.0.1 MASTER_PORT={}", world,
                    test::free_port()));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("a world of {} processes is more than "
                                                     "titan-train's rendezvous holds (1048576 at "
                                                     "most)",
                                                     world)));
  }
  // Within kMaxWorldSize but beyond what the open-file limit lets rank 0 serve.
  const auto r = test::run_shell(fmt::format(
      "ulimit -n 512; env RANK=0 WORLD_SIZE=4096 MASTER_ADDR=127.0.0.1 MASTER_PORT={} timeout 60 "
      "{} {} 2>&1",
      test::free_port(), test::binary(), test::tiny_run(dir + "/run", 1)));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("a world of 4096 processes needs about") &&
                           Catch::Contains("ulimit -Hn"));
  CHECK_FALSE(std::filesystem::exists(dir + "/run"));
}

TEST_CASE("hostile ranks: two processes started as one rank both stop with exit 2, named",
          "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_rank_twice");
  // RANK=0 twice: the second cannot serve the store and finds the first's; RANK=1 twice in a
  // world of 3 whose rank 2 never comes (so neither copy finishes the rendezvous first).
  for (int rank : {0, 1}) {
    const int port = test::free_port();
    std::string script;
    if (rank == 1) {
      std::filesystem::create_directories(dir + "/r0");
      script += start_rank(dir + "/r0", port, 0,
                           rank_args(dir + "/r0", "--comm.init_timeout_seconds 8"), 3);
    }
    for (int copy = 0; copy < 2; ++copy) {
      const std::string copy_dir = fmt::format("{}/copy{}", dir, copy);
      std::filesystem::create_directories(copy_dir);
      script += start_rank(copy_dir, port, rank, rank_args(copy_dir, ""), rank == 1 ? 3 : 2);
    }
    test::run_shell(script + "wait");
    for (int copy = 0; copy < 2; ++copy) {
      const test::RankResult result = rank_result(fmt::format("{}/copy{}", dir, copy), rank);
      INFO("RANK=" << rank << ", copy " << copy << ": " << result.output);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.output, Catch::Contains(fmt::format("is rank {} too", rank)));
    }
  }
}

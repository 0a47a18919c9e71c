// Data parallelism through the binary: several titan-train processes on this machine, started
// with torchrun's variables, over Gloo on loopback.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "analysis/fingerprint_reader.h"
#include "catch_torch.h"
#include "distributed/world.h"
#include "test_ranks.h"
#include "test_util.h"
#include "util/stopwatch.h"

namespace titan {
namespace {

using test::rank_env;
using test::RankResult;
using test::run_ranks;
using test::same_args;

// Shell text that starts 2 ranks of `args` in the background, output in rank<N>.out and PIDs in
// $p0 and $p1, then waits (at most 120 s) until rank 0 has logged a step. Each rank runs under
// `timeout 120`, so that a hang fails the test instead of blocking it, except `untimed_rank`,
// whose $p must be titan-train's own PID (kill -9 of `timeout` would leave its child running).
std::string start_two_ranks(const std::string& args, int untimed_rank = -1) {
  const int port = test::free_port();
  std::string script;
  for (int r = 0; r < 2; ++r) {
    script += "env " + rank_env(r, 2, port) + (r == untimed_rank ? " " : " timeout 120 ") +
              test::binary() + " " + args + " >rank" + std::to_string(r) + ".out 2>&1 & p" +
              std::to_string(r) + "=$!; ";
  }
  return script +
         "for i in $(seq 1200); do grep -q 'step:' rank0.out 2>/dev/null && break; "
         "sleep 0.1; done; ";
}

std::string write_tokens(const std::string& dir) { return test::write_rank_tokens(dir); }

std::vector<double> losses(const std::string& fingerprint) {
  std::vector<double> out;
  for (const auto& s : read_fingerprint_log(fingerprint).steps) out.push_back(s.loss);
  return out;
}

}  // namespace

TEST_CASE("data parallel: 2 ranks x b sequences train as 1 rank x 2b, and the replicas agree",
          "[distributed]") {
  auto dir = test::temp_dir("dp_parity");
  const std::string data =
      " --training.dataset tokens --training.dataset_path " + write_tokens(dir);
  auto one =
      test::run_titan(test::tiny_run(dir + "/one", 5, data + " --training.local_batch_size 4"));
  REQUIRE(one.exit_code == 0);
  auto two = run_ranks(dir, same_args(2, test::tiny_run(dir + "/two", 5, data)));
  INFO(two[0].output << two[1].output);
  REQUIRE(two[0].exit_code == 0);
  REQUIRE(two[1].exit_code == 0);
  CHECK_THAT(two[0].output, Catch::Contains("data parallel: 2 ranks over gloo"));
  CHECK_THAT(two[1].output, Catch::Contains("rank 1 of 2"));
  CHECK_THAT(two[1].output,
             !Catch::Contains("step:"));  // LOG_RANK 0 alone prints the console lines

  const auto a = losses(dir + "/one/fingerprint.log");
  const auto b = losses(dir + "/two/fingerprint.log");
  REQUIRE(a.size() == 5);
  REQUIRE(b.size() == 5);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i + 1 << ": " << a[i] << " vs " << b[i]);
    CHECK(std::abs(a[i] - b[i]) <= 1e-5 * std::abs(a[i]));
  }
  CHECK(b.back() < b.front());
  // Gradients are all-reduced, so the replicas stay bitwise identical, parameters included.
  CHECK(test::read_text(dir + "/two/fingerprint.log") ==
        test::read_text(dir + "/two/fingerprint.rank1.log"));
  CHECK(std::filesystem::exists(dir + "/two/metrics.jsonl"));
  CHECK_FALSE(std::filesystem::exists(dir + "/two/metrics.rank1.jsonl"));
}

TEST_CASE(
    "data parallel: TensorBoard for all ranks shares rank 0's run folder, and max_loss is "
    "the larger rank's loss",
    "[distributed][tensorboard]") {
  auto dir = test::temp_dir("dp_tensorboard");
  const std::string data =
      " --training.dataset tokens --training.dataset_path " + write_tokens(dir);
  auto two = run_ranks(
      dir, same_args(2, test::tiny_run(dir + "/run", 2,
                                       data + " --metrics.log_freq 1 --metrics.enable_tensorboard "
                                              "true --metrics.save_for_all_ranks true")));
  INFO(two[0].output << two[1].output);
  REQUIRE(two[0].exit_code == 0);
  REQUIRE(two[1].exit_code == 0);
  std::vector<std::filesystem::path> minutes;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/run/tb")) minutes.push_back(e);
  REQUIRE(minutes.size() == 1);
  for (const char* rank : {"rank_0", "rank_1"}) {
    REQUIRE(std::filesystem::is_directory(minutes[0] / rank));
    CHECK(std::distance(std::filesystem::directory_iterator(minutes[0] / rank),
                        std::filesystem::directory_iterator()) == 1);
  }
  // The ranks read different documents, so the larger one's loss is above the mean and below
  // twice it.
  std::smatch m;
  const std::string first = test::read_text(dir + "/run/metrics.jsonl");
  REQUIRE(std::regex_search(first, m,
                            std::regex(R"("loss": ([-+.e0-9]+),.*"max_loss": ([-+.e0-9]+),)")));
  const double loss = std::stod(m[1]), max_loss = std::stod(m[2]);
  CHECK(max_loss > loss);
  CHECK(max_loss < 2 * loss);
}

TEST_CASE("data parallel: two deterministic 2-rank runs write identical fingerprints",
          "[distributed]") {
  auto dir = test::temp_dir("dp_determinism");
  const std::string extra =
      " --debug.deterministic true --activation_checkpoint.mode full "
      "--debug.numerics_trace blocks";
  for (const char* run : {"a", "b"}) {
    auto r = run_ranks(dir, same_args(2, test::tiny_run(dir + "/" + run, 4, extra)));
    INFO(r[0].output << r[1].output);
    REQUIRE(r[0].exit_code == 0);
    REQUIRE(r[1].exit_code == 0);
  }
  for (const char* file :
       {"/fingerprint.log", "/fingerprint.rank1.log", "/numerics.log", "/numerics.rank1.log"}) {
    INFO(file);
    CHECK(test::read_text(dir + "/a" + file) == test::read_text(dir + "/b" + file));
  }
  // compare reads a rank's files: its fingerprint, the run's config.toml, its numerics log.
  auto same = test::run_titan("compare " + dir + "/a/fingerprint.rank1.log " + dir +
                              "/b/fingerprint.rank1.log");
  INFO(same.output);
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.output, Catch::Contains("bitwise equal"));
  CHECK_THAT(same.output, !Catch::Contains("not compared"));
}

TEST_CASE("data parallel: the seed is agreed, and ranks that start apart are refused",
          "[distributed]") {
  auto dir = test::temp_dir("dp_seed");
  // No debug.seed: rank 0 draws one and the other rank uses it.
  const std::string no_seed =
      "--model.flavor tiny --training.seq_len 16 --training.device cpu "
      "--training.local_batch_size 2 --training.steps 2 ";
  auto drawn = run_ranks(dir, same_args(2, no_seed + "--job.dump_folder " + dir + "/drawn"));
  INFO(drawn[0].output << drawn[1].output);
  REQUIRE(drawn[0].exit_code == 0);
  REQUIRE(drawn[1].exit_code == 0);
  CHECK(test::read_text(dir + "/drawn/fingerprint.log") ==
        test::read_text(dir + "/drawn/fingerprint.rank1.log"));

  // Different seeds are different configs: refused at the rendezvous (test_hostile_runs.cpp).
  auto seeds = run_ranks(dir, {test::tiny_run(dir + "/seeds", 2, "--debug.seed 1"),
                               test::tiny_run(dir + "/seeds", 2, "--debug.seed 2")});
  for (const auto& r : seeds) {
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("rank 1: debug.seed 1 -> 2"));
  }
  // One config whose relative initial_load_path names other weights in each rank's folder:
  // the configs agree, the parameters do not.
  for (const char* seed : {"1", "2"}) {
    auto saved = test::run_titan(test::tiny_run(
        dir + "/w" + seed, 1, std::string("--checkpoint.enable true --debug.seed ") + seed));
    REQUIRE(saved.exit_code == 0);
    std::filesystem::create_directories(dir + "/cwd" + seed);
    std::filesystem::create_directory_symlink(dir + "/w" + seed + "/checkpoint",
                                              dir + "/cwd" + seed + "/weights");
  }
  const int port = test::free_port();
  std::string script;
  for (int r = 0; r < 2; ++r) {
    script += fmt::format(
        "(cd {0}/cwd{1} && env {2} timeout 300 {3} {4} >{0}/apart{5}.out 2>&1; "
        "echo $? >{0}/apart{5}.rc) & ",
        dir, r + 1, rank_env(r, 2, port), test::binary(),
        test::tiny_run(dir + "/apart", 2, "--checkpoint.initial_load_path weights"), r);
  }
  test::run_shell(script + "wait");
  for (int r = 0; r < 2; ++r) {
    const std::string out = test::read_text(fmt::format("{}/apart{}.out", dir, r));
    INFO(out);
    CHECK(std::stoi(test::read_text(fmt::format("{}/apart{}.rc", dir, r))) == 1);
    CHECK_THAT(out, Catch::Contains("the ranks start from different parameters"));
  }
}

TEST_CASE("data parallel: a killed rank makes the other exit non-zero naming it", "[distributed]") {
  auto dir = test::temp_dir("dp_kill");
  const std::string args = test::tiny_run(dir + "/out", 1000000, "--comm.train_timeout_seconds 30");
  for (int victim : {1, 0}) {
    const int survivor = 1 - victim;
    const std::string script = "cd " + dir + "; rm -rf out; " + start_two_ranks(args, victim) +
                               "sleep 0.5; kill -9 $p" + std::to_string(victim) +
                               "; start=$(date +%s%N); wait $p" + std::to_string(survivor) +
                               "; rc=$?; echo \"$rc $start $(date +%s%N)\"";
    auto r = test::run_shell(script);
    const std::string survivor_out =
        test::read_text(dir + "/rank" + std::to_string(survivor) + ".out");
    INFO("victim rank " << victim << "; " << r.output << survivor_out);
    std::istringstream result(r.output);
    int rc = -1;
    int64_t kill_ns = 0, exit_ns = 0;
    result >> rc >> kill_ns >> exit_ns;
    const double seconds = static_cast<double>(exit_ns - kill_ns) / 1e9;
    CHECK(rc == 1);
    CHECK(seconds < 30);  // within comm.train_timeout_seconds
    CHECK_THAT(survivor_out, Catch::Contains(victim == 1 ? "rank 1 is gone" : "rank 0 is gone"));
    // In titan-train's words only: no gloo source locations, no glog preamble.
    CHECK_THAT(survivor_out, !Catch::Contains("gloo/transport") &&
                                 !Catch::Contains("Logging before InitGoogleLogging"));
  }
}

TEST_CASE(
    "data parallel: one run's ranks share the folder, another run is refused, and a SIGTERM "
    "to one rank stops both at the same step with a checkpoint",
    "[distributed]") {
  auto dir = test::temp_dir("dp_term");
  const std::string args = test::tiny_run(dir + "/out", 1000000,
                                          "--checkpoint.enable true --checkpoint.interval 1000000");
  const std::string script =
      "cd " + dir + "; " + start_two_ranks(args) + test::binary() + " " +
      test::tiny_run(dir + "/out", 2) +
      " >intruder.out 2>&1; echo \"intruder $?\"; "
      "kill -TERM $p1; wait $p0; echo \"rank0 $?\"; wait $p1; echo \"rank1 $?\"";
  auto r = test::run_shell(script);
  const std::string out0 = test::read_text(dir + "/rank0.out");
  const std::string out1 = test::read_text(dir + "/rank1.out");
  INFO(r.output << test::read_text(dir + "/intruder.out") << out0 << out1);
  CHECK_THAT(r.output, Catch::Contains("intruder 2"));
  CHECK_THAT(test::read_text(dir + "/intruder.out"),
             Catch::Contains("in use by another titan-train run"));
  CHECK_THAT(r.output, Catch::Contains("rank0 0"));
  CHECK_THAT(r.output, Catch::Contains("rank1 0"));
  std::smatch m;
  REQUIRE(std::regex_search(out0, m, std::regex(R"(stopped by SIGTERM after step (\d+))")));
  const std::string step = m[1];
  CHECK(std::filesystem::exists(dir + "/out/checkpoint/step-" + step + "/train_state.rank1.bin"));
  // Both ranks wrote the same steps.
  CHECK(test::read_text(dir + "/out/fingerprint.log") ==
        test::read_text(dir + "/out/fingerprint.rank1.log"));
}

TEST_CASE("data parallel: a rank that never arrives is named within comm.init_timeout_seconds",
          "[distributed]") {
  auto dir = test::temp_dir("dp_arrive");
  const int port = test::free_port();
  const auto start = std::chrono::steady_clock::now();
  auto r = test::run_titan_env(rank_env(0, 2, port),
                               test::tiny_run(dir, 2, "--comm.init_timeout_seconds 3"));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("rank 1 did not arrive"));
  CHECK_THAT(r.output, Catch::Contains("comm.init_timeout_seconds = 3 s"));
  CHECK(seconds_since(start) < 30);
  CHECK_FALSE(std::filesystem::exists(dir + "/fingerprint.log"));  // nothing written

  auto lonely = test::run_titan_env(rank_env(1, 2, test::free_port()),
                                    test::tiny_run(dir, 2, "--comm.init_timeout_seconds 3"));
  INFO(lonely.output);
  CHECK(lonely.exit_code == 1);
  CHECK_THAT(lonely.output, Catch::Contains("rank 0 did not arrive"));
}

TEST_CASE("data parallel: checkpoints hold every rank's state and resume bit-exactly",
          "[distributed]") {
  auto dir = test::temp_dir("dp_checkpoint");
  const std::string ckpt =
      " --checkpoint.enable true --checkpoint.interval 3 "
      "--checkpoint.last_save_model_only false --debug.deterministic true";
  auto whole = run_ranks(dir, same_args(2, test::tiny_run(dir + "/whole", 6, ckpt)));
  REQUIRE(whole[0].exit_code == 0);
  const std::string flags = test::tiny_run(dir + "/split", 6, ckpt);
  auto first = run_ranks(dir, same_args(2, flags));
  REQUIRE(first[0].exit_code == 0);
  const std::string step3 = dir + "/split/checkpoint/step-3";
  CHECK(std::filesystem::exists(step3 + "/train_state.rank1.bin"));
  CHECK_THAT(test::read_text(step3 + "/manifest.txt"), Catch::Contains("world_size 2"));
  std::filesystem::remove_all(dir + "/split/checkpoint/step-6");  // as if killed after step 3
  auto second = run_ranks(dir, same_args(2, flags));
  INFO(second[0].output << second[1].output);
  REQUIRE(second[0].exit_code == 0);
  REQUIRE(second[1].exit_code == 0);
  CHECK_THAT(second[0].output, Catch::Contains("resumed from " + step3 + " (step 3)"));
  for (const char* file : {"/fingerprint.log", "/fingerprint.rank1.log"}) {
    INFO(file);
    CHECK(test::fingerprint_step_list(dir + "/whole" + file).size() == 6);
    CHECK(test::read_text(dir + "/whole" + file) == test::read_text(dir + "/split" + file));
  }
  // One process cannot continue a 2-rank run: its ranks' data positions and RNG states differ.
  std::filesystem::remove_all(dir + "/split/checkpoint/step-6");
  auto alone = test::run_titan(flags);
  INFO(alone.output);
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.output, Catch::Contains("saved by 2 ranks, but this run has 1"));
}

TEST_CASE("data parallel: degrees that do not fit the world are refused before the rendezvous",
          "[distributed]") {
  auto dir = test::temp_dir("dp_degrees");
  // No rank 1 and no listening store: the refusal comes first, so nothing waits.
  auto r = test::run_titan_env(rank_env(0, 2, test::free_port()),
                               test::tiny_run(dir, 2,
                                              "--parallelism.data_parallel_replicate_degree 3 "
                                              "--parallelism.data_parallel_shard_degree 1"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("parallelism.data_parallel_replicate_degree"));
  CHECK_THAT(r.output, Catch::Contains("the world has 2 processes"));

  auto tp = test::run_titan(test::tiny_run(dir, 2, "--parallelism.tensor_parallel_degree 2"));
  CHECK(tp.exit_code == 2);
  CHECK_THAT(tp.output, Catch::Contains("parallelism.tensor_parallel_degree"));
}

TEST_CASE("world: Slurm's node lists give the first host as scontrol would", "[distributed]") {
  CHECK(first_host_of_nodelist("node[07-09,12],gpu1", "V") == "node07");
  CHECK(first_host_of_nodelist("gpu1,node[1-2]", "V") == "gpu1");
  CHECK(first_host_of_nodelist("rack[2-3]-n[5,7]", "V") == "rack2-n5");
  CHECK(first_host_of_nodelist("localhost", "V") == "localhost");
  CHECK_THROWS_WITH(first_host_of_nodelist("node[1-2", "SLURM_JOB_NODELIST"),
                    Catch::Contains("SLURM_JOB_NODELIST") && Catch::Contains("unbalanced"));
}

}  // namespace titan

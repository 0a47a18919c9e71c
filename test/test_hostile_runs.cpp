// Hostile runs through the real binary: checkpoint folders whose names lie, launchers whose
// variables disagree, ranks started with different configs, and input that used to end in raw
// library text (a TOML nested past toml++'s stack, bad thread variables). Each is refused or
// warned about in titan-train's own words.
#include <fmt/format.h>
#include <torch/version.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "catch_torch.h"
#include "test_util.h"
#include "util/memory_limit.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

// A run of `steps` steps into `dir` that saves a full checkpoint every step.
test::RunResult checkpointed_run(const std::string& dir, int steps, const std::string& extra = "") {
  return test::run_titan_bounded(test::tiny_run(
      dir, steps,
      "--checkpoint.enable true --checkpoint.interval 1 --checkpoint.last_save_model_only false " +
          extra));
}

}  // namespace

TEST_CASE(
    "hostile runs: checkpoint folders are taken by exact name and checked against their "
    "manifest",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_names");
  const auto first = checkpointed_run(dir, 3);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const std::string ckpt = dir + "/checkpoint";
  fs::copy(ckpt + "/step-2", ckpt + "/step-100", fs::copy_options::recursive);  // a renamed backup
  fs::copy(ckpt + "/step-3", ckpt + "/step-07", fs::copy_options::recursive);   // not step 7
  fs::create_directories(ckpt + "/step-9");                                     // no manifest
  const auto resumed = checkpointed_run(dir, 4);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("step-3") && Catch::Contains("resum"));
  CHECK_THAT(
      resumed.output,
      Catch::Contains(ckpt + "/step-100: skipped: its manifest says step 2, its name step 100"));
  CHECK_THAT(resumed.output, Catch::Contains(ckpt + "/step-07: skipped: the name is not step-N"));
  CHECK_THAT(resumed.output,
             Catch::Contains(ckpt + "/step-9: skipped: incomplete: no manifest.txt"));
  CHECK(fs::exists(ckpt + "/step-4/manifest.txt"));
}

TEST_CASE("hostile runs: initial_load_path takes a folder of checkpoints, as export does",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_initial");
  REQUIRE(checkpointed_run(dir + "/a", 2).exit_code == 0);
  const auto r = test::run_titan_bounded(
      test::tiny_run(dir + "/b", 1, "--checkpoint.initial_load_path " + dir + "/a/checkpoint"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("initial weights from " + dir + "/a/checkpoint/step-2"));
}

TEST_CASE("hostile runs: checkpoint.folder stays inside the dump folder unless it is absolute",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_ckpt_folder");
  for (const char* folder : {"../x", ".", "a/../.."}) {
    const auto r = test::run_titan_bounded(test::tiny_run(
        dir + "/run", 1, fmt::format("--checkpoint.enable true --checkpoint.folder {}", folder)));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("checkpoint.folder") &&
                             Catch::Contains("is not a folder inside job.dump_folder"));
  }
  const auto absolute = checkpointed_run(dir + "/run", 1, "--checkpoint.folder " + dir + "/abs");
  INFO(absolute.output);
  CHECK(absolute.exit_code == 0);
  CHECK(fs::exists(dir + "/abs/step-1/manifest.txt"));
}

TEST_CASE("hostile runs: torchrun variables that contradict each other are refused", "[hostile]") {
  const auto dir = test::temp_dir("hostile_env");
  const std::string args = test::tiny_run(dir, 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RANK=1", "RANK"},
      {"WORLD_SIZE=2 RANK=0 LOCAL_WORLD_SIZE=0", "LOCAL_WORLD_SIZE"},
      {"WORLD_SIZE=2 RANK=1 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2", "LOCAL_RANK"},
      {"WORLD_SIZE=2 RANK=0 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2", "LOCAL_RANK"},
  };
  for (const auto& [env, named] : cases) {
    const auto r = test::run_titan_bounded(args, env);
    INFO(env << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(named));
  }
}

TEST_CASE("hostile runs: a TOML nested past any config's depth is refused, not a crash",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_nesting");
  std::string header = "[a";
  for (int i = 0; i < 100000; ++i) header += ".a";
  const std::string deep = test::write_text(dir + "/deep.toml", header + "]\nx = 1\n");
  std::string value = "x = ";
  for (int i = 0; i < 100000; ++i) value += "[";
  const std::string arrays = test::write_text(dir + "/arrays.toml", "[training]\n" + value + "\n");
  for (const auto& config : {deep, arrays}) {
    const auto r = test::run_titan_bounded("--config " + config);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output,
               Catch::Contains(config + ":") && Catch::Contains("nested more than 32 levels deep"));
  }
}

TEST_CASE("hostile runs: thread variables libgomp or OpenBLAS would reject are refused",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_threads");
  for (const char* env :
       {"OMP_NUM_THREADS=abc", "OMP_WAIT_POLICY=bogus", "OPENBLAS_NUM_THREADS=-1"}) {
    const auto r = test::run_titan_bounded(test::tiny_run(dir, 1), env);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    const std::string name = std::string(env).substr(0, std::string(env).find('='));
    CHECK_THAT(r.output, Catch::Contains("config error: environment variable " + name));
  }
  const auto list = test::run_titan_bounded(test::tiny_run(dir, 1), "OMP_NUM_THREADS=2,1");
  INFO(list.output);
  CHECK(list.exit_code == 0);
}

TEST_CASE(
    "hostile runs: ranks started with different configs or world sizes stop at the "
    "rendezvous, named",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_ranks");
  const int port = test::free_port();
  auto start = [&](int rank, int world, const std::string& extra) {
    return fmt::format(
        "(env RANK={0} WORLD_SIZE={1} LOCAL_RANK={0} LOCAL_WORLD_SIZE={1} MASTER_ADDR=127.0.0.1 "
        "MASTER_PORT={2} timeout 120 {3} {4} >{5}/rank{0}.out 2>&1; echo $? >{5}/rank{0}.rc) & ",
        rank, world, port, test::binary(),
        test::tiny_run(dir + "/run", 2, extra + " --comm.init_timeout_seconds 20"), dir);
  };
  auto results = [&] {
    std::vector<std::pair<int, std::string>> out;
    for (int r = 0; r < 2; ++r) {
      out.emplace_back(std::stoi(test::read_text(fmt::format("{}/rank{}.rc", dir, r))),
                       test::read_text(fmt::format("{}/rank{}.out", dir, r)));
    }
    return out;
  };
  test::run_shell(start(0, 2, "") + start(1, 2, "--optimizer.lr 0.5 --training.steps 3") + "wait");
  for (const auto& [code, output] : results()) {
    INFO(output);
    CHECK(code == 2);
    CHECK_THAT(output, Catch::Contains("the ranks were started with different configs") &&
                           Catch::Contains("rank 1: ") &&
                           Catch::Contains("optimizer.lr 0.0008 -> 0.5") &&
                           Catch::Contains("training.steps 2 -> 3"));
  }
  test::run_shell(start(0, 2, "") + start(1, 3, "") + "wait");
  for (const auto& [code, output] : results()) {
    INFO(output);
    CHECK(code == 2);
    CHECK_THAT(output, Catch::Contains("(world size, launcher)"));
    CHECK_THAT(output, !Catch::Contains("gone"));
  }
}

TEST_CASE(
    "hostile runs: a sequence too long for memory is refused, attention's activations "
    "counted, before the dump folder is made",
    "[hostile]") {
  // The debug model at 2^20 tokens needs at least 32 GiB (logits, block inputs, one block's
  // q, k, v and SwiGLU projections); on a machine with more it might fit: not a bad input.
  if (process_memory_limit().bytes > 32.0 * (1 << 30)) return;
  const auto dir = test::temp_dir("hostile_long") + "/run";
  const auto r = test::run_titan_bounded("--config " + test::source_dir() +
                                         "/configs/debug_model.toml --training.seq_len 1048576 "
                                         "--training.local_batch_size 1 --training.steps 1 "
                                         "--job.dump_folder " +
                                         dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("for the activations of 1 x 1048576 tokens"));
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE(
    "hostile runs: a rendezvous port in use and a duplicated RANK end in titan-train's "
    "words, without libtorch's log lines",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_port");
  const int port = test::free_port();
  const std::string env =
      fmt::format("WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} ", port);
  // A listener on the port (python3's socket module, the standard library only) while rank 0
  // starts.
  const auto busy = test::run_shell(fmt::format(
      "python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",{0})); s.listen(); "
      "open(\"{4}/listening\", \"w\").close(); time.sleep(60)' & "
      "for i in $(seq 1200); do [ -e {4}/listening ] && break; sleep 0.1; done; "
      "env {1} RANK=0 LOCAL_RANK=0 timeout 60 {2} {3} 2>&1; kill $!",
      port, env, test::binary(), test::tiny_run(dir + "/busy", 1, "--comm.init_timeout_seconds 5"),
      dir));
  INFO(busy.output);
  CHECK_THAT(busy.output, Catch::Contains("rank 0 cannot serve the rendezvous store on port " +
                                          std::to_string(port)));
  CHECK_THAT(busy.output, !Catch::Contains("InitGoogleLogging") && !Catch::Contains("socket.cpp"));
  // Two processes that both say RANK=0: the second cannot serve the store either, and says so.
  const auto twice = test::run_shell(fmt::format(
      "for i in 0 1; do (env {0} RANK=0 LOCAL_RANK=0 timeout 60 {1} {2} >{3}/twice$i.out 2>&1; "
      "echo $? >{3}/twice$i.rc) & done; wait",
      env, test::binary(), test::tiny_run(dir + "/twice", 1, "--comm.init_timeout_seconds 5"),
      dir));
  const std::string outputs =
      test::read_text(dir + "/twice0.out") + test::read_text(dir + "/twice1.out");
  INFO(outputs);
  CHECK_THAT(outputs, Catch::Contains("rank 0 cannot serve the rendezvous store on port") ||
                          Catch::Contains("is rank 0 too"));
  CHECK_THAT(outputs, !Catch::Contains("InitGoogleLogging") && !Catch::Contains("socket.cpp"));
}

TEST_CASE(
    "hostile runs: with a loopback MASTER_ADDR the rendezvous store listens on loopback only "
    "(libtorch 2.x)",
    "[hostile][distributed]") {
  const auto dir = test::temp_dir("hostile_listen");
  const int port = test::free_port();
  // Rank 0 of 2 alone waits for rank 1 at the rendezvous (8 s, then it gives up); meanwhile the
  // kernel's table of listening TCP sockets (state 0A) on the port gives the addresses bound.
  const auto r = test::run_shell(fmt::format(
      "env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT={0} timeout 60 {1} {2} >{3}/rank0.out 2>&1 & "
      "for i in $(seq 200); do "
      "  found=$(awk '$4 == \"0A\" && $2 ~ /:{0:04X}$/ {{print FILENAME, $2}}' /proc/net/tcp "
      "/proc/net/tcp6); [ -n \"$found\" ] && break; sleep 0.1; done; "
      "sleep 0.5; awk '$4 == \"0A\" && $2 ~ /:{0:04X}$/ {{print FILENAME, $2}}' /proc/net/tcp "
      "/proc/net/tcp6; wait",
      port, test::binary(), test::tiny_run(dir + "/run", 1, "--comm.init_timeout_seconds 8"), dir));
  INFO(r.output);
  INFO(test::read_text(dir + "/rank0.out"));
  REQUIRE_THAT(r.output, Catch::Contains(fmt::format(":{:04X}", port)));  // it listens
#if TORCH_VERSION_MAJOR >= 2
  CHECK(r.output == fmt::format("/proc/net/tcp 0100007F:{:04X}\n", port));
#else
  WARN("libtorch 1.13's TCPStore listens on every interface (it takes no socket): " + r.output);
#endif
}

TEST_CASE(
    "hostile runs: an allocation that fails in a step is named with the step, the phase "
    "and the size",
    "[hostile][libtorch2]") {
  // An address-space limit (ulimit -v) that the start-up fits in and step 1's forward at 131,072
  // tokens (about 12 GB of activations) does not: the memory check, which counts the machine's
  // memory and a lower bound of the activations (about 4 GB here), lets it pass. The
  // binary's own mappings vary (a CUDA libtorch maps gigabytes): the limit is 1 GB above the
  // smallest power of two (from 1 GB) that --version loads under.
  const auto dir = test::temp_dir("hostile_oom");
  int64_t loads = 1000000;
  while (loads < 128000000 &&
         test::run_shell(
             fmt::format("ulimit -v {}; {} --version >/dev/null 2>&1", loads, test::binary()))
                 .exit_code != 0) {
    loads *= 2;
  }
  const auto r = test::run_shell(fmt::format(
      "ulimit -v {}; timeout 120 {} --config {}/configs/debug_model.toml --training.seq_len "
      "8192 --training.local_batch_size 16 --training.steps 1 --job.dump_folder {}/run 2>&1",
      loads + 1000000, test::binary(), test::source_dir(), dir));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("titan-train: error: out of memory at step 1, in the ") &&
                           Catch::Contains("(an allocation of ") &&
                           Catch::Contains("hint: lower training.local_batch_size"));
  CHECK_THAT(r.output, !Catch::Contains("alloc_cpu") && !Catch::Contains("DefaultCPUAllocator"));
  // A training step that fits and a validation batch that does not (524,288 tokens: its first
  // block's activations pass the limit).
  const auto v = test::run_shell(fmt::format(
      "ulimit -v {}; timeout 120 {} --config {}/configs/debug_model.toml --training.seq_len "
      "1024 --training.local_batch_size 1 --training.steps 1 --validation.enable "
      "--validation.dataset synthetic --validation.seq_len 1024 --validation.local_batch_size "
      "512 --validation.steps 1 --job.dump_folder {}/validated 2>&1",
      loads + 1000000, test::binary(), test::source_dir(), dir));
  INFO(v.output);
  CHECK(v.exit_code == 1);
  CHECK_THAT(v.output, Catch::Contains("titan-train: error: out of memory at step 1, in the "
                                       "validation's forward (an allocation of ") &&
                           Catch::Contains("hint: lower validation.local_batch_size"));
}

// Shell text that runs titan-train with `signal` already pending at exec (blocked, then sent:
// a pending signal survives execve), the earliest moment a signal can reach it, whatever the
// machine's load: no delay to guess.
std::string with_signal_pending_at_exec(const std::string& signal, const std::string& args) {
  return fmt::format(
      "python3 -c 'import os, signal, sys; s = signal.SIG{0}; "
      "signal.pthread_sigmask(signal.SIG_BLOCK, [s]); os.kill(os.getpid(), s); "
      "os.execv(sys.argv[1], sys.argv[1:])' {1} {2}",
      signal, test::binary(), args);
}

TEST_CASE(
    "hostile runs: a SIGTERM or SIGINT during start-up stops the run with 143 or 130 before it "
    "writes anything",
    "[hostile][libtorch2]") {
  const auto dir = test::temp_dir("hostile_term");
  for (const auto& [signal, code, extra] : std::vector<std::tuple<std::string, int, std::string>>{
           {"TERM", 143, "--checkpoint.enable true"}, {"INT", 130, ""}}) {
    const auto r = test::run_shell(
        with_signal_pending_at_exec(signal, test::tiny_run(dir + "/run", 2, extra)) +
        " 2>&1; echo rc=$?; ls -A " + dir + "/run 2>&1");
    INFO(r.output);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("rc={}", code)) &&
                             Catch::Contains(fmt::format("titan-train: stopped by SIG{} during "
                                                         "start-up, before step 1; nothing was "
                                                         "written",
                                                         signal)) &&
                             Catch::Contains("No such file or directory"));
    CHECK_THAT(r.output, !Catch::Contains("step:"));
  }
  // The commands that do not train end as the signal's default action ends them.
  for (const std::string& args : {std::string("--version"), "compare " + dir + " " + dir}) {
    const auto r = test::run_shell(with_signal_pending_at_exec("INT", args) + "; echo rc=$?");
    INFO(args << ": " << r.output);
    CHECK_THAT(r.output, Catch::EndsWith("rc=130\n"));
    CHECK_THAT(r.output, !Catch::Contains("titan-train"));
  }
}

TEST_CASE(
    "hostile runs: past a file-size limit (ulimit -f) a write is exit 1 naming the file and "
    "File too large: metrics.jsonl keeps whole lines, a checkpoint save and an export leave "
    "nothing half-written",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_fsize");
  // bash, whose ulimit -f counts KiB (dash counts 512-byte blocks). 8 KiB: metrics.jsonl passes
  // it within a few dozen steps.
  const auto lines =
      test::run_shell(fmt::format("bash -c 'ulimit -f 8; timeout 120 {} {}' 2>&1", test::binary(),
                                  test::tiny_run(dir + "/lines", 1000, "--metrics.log_freq 1")));
  INFO(lines.output);
  CHECK(lines.exit_code == 1);
  CHECK_THAT(lines.output,
             Catch::Contains("cannot write " + dir + "/lines/metrics.jsonl: File too large"));
  const std::string jsonl = test::read_text(dir + "/lines/metrics.jsonl");
  CHECK(jsonl.size() > 1000);
  CHECK(jsonl.back() == '\n');
  // A full checkpoint at step 2 (about 2 MiB) past 1 MiB: the save fails, its temporary folder
  // goes.
  const std::string save =
      test::tiny_run(dir + "/save", 4, "--checkpoint.enable --checkpoint.interval 2");
  const auto saved = test::run_shell(
      fmt::format("bash -c 'ulimit -f 1000; timeout 120 {} {}' 2>&1", test::binary(), save));
  INFO(saved.output);
  CHECK(saved.exit_code == 1);
  CHECK_THAT(saved.output, Catch::Contains("/save/checkpoint/.step-2.tmp/") &&
                               Catch::Contains(": File too large"));
  CHECK_FALSE(fs::exists(dir + "/save/checkpoint/.step-2.tmp"));
  CHECK_FALSE(fs::exists(dir + "/save/checkpoint/step-2"));
  // Saved without a limit, exported past one: no output file.
  REQUIRE(test::run_titan(save).exit_code == 0);
  const auto exported = test::run_shell(
      fmt::format("bash -c 'ulimit -f 100; {} export {}/save/checkpoint -o {}/w.safetensors' 2>&1",
                  test::binary(), dir, dir));
  INFO(exported.output);
  CHECK(exported.exit_code == 1);
  CHECK_THAT(exported.output, Catch::Contains("File too large"));
  CHECK_FALSE(fs::exists(dir + "/w.safetensors"));
}

TEST_CASE(
    "hostile runs: a stack limit below 1 MiB (ulimit -s) is exit 2 at start naming it, instead "
    "of a segmentation fault in the first step",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_stack");
  const auto small = test::run_shell(fmt::format("bash -c 'ulimit -s 128; {} {}' 2>&1",
                                                 test::binary(), test::tiny_run(dir + "/a", 2)));
  INFO(small.output);
  CHECK(small.exit_code == 2);
  CHECK_THAT(small.output, Catch::Contains("ulimit -s: the stack limit is 128 KiB; titan-train "
                                           "needs at least 1024 KiB"));
  CHECK_FALSE(fs::exists(dir + "/a"));
  const auto enough = test::run_shell(fmt::format("bash -c 'ulimit -s 1024; {} {}' 2>&1",
                                                  test::binary(), test::tiny_run(dir + "/b", 2)));
  INFO(enough.output);
  CHECK(enough.exit_code == 0);
}

// The user's files and the command line: flags never swallow each other, a failed start leaves an
// earlier run's outputs alone, the dump folder is locked, lines are written whole, and SIGPIPE,
// SIGTERM and SIGINT end a run the documented way.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "catch_torch.h"
#include "config/loader.h"
#include "test_util.h"
#include "util/error.h"
#include "util/files.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

using test::tiny_run;

Config parse(std::vector<std::string> args) {
  args.insert(args.begin(), "titan-train");
  return parse_command_line(args).config;
}

}  // namespace

TEST_CASE("outputs: --config naming a folder, or empty, is exit 2 and starts nothing",
          "[outputs]") {
  auto dir = test::temp_dir("config_dir") + "/out";
  auto r = test::run_titan("--config " + fs::temp_directory_path().string() +
                           " --job.dump_folder " + dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("Is a directory"));
  r = test::run_titan("--config= --job.dump_folder " + dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--config is empty"));
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("outputs: a flag that needs a value does not swallow the next flag", "[outputs]") {
  auto dir = test::temp_dir("swallow");
  auto r = test::run_titan("--job.description --debug.deterministic --job.dump_folder " + dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--job.description needs a value"));
  r = test::run_shell("cd " + dir + " && " + test::binary() +
                      " --job.dump_folder --debug.deterministic 2>&1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--job.dump_folder needs a value"));
  CHECK_FALSE(fs::exists(dir + "/--debug.deterministic"));
  r = test::run_titan("--model.flavor --training.steps 3 --job.dump_folder " + dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--model.flavor needs a value"));
}

TEST_CASE("outputs: --config given twice is refused naming both files", "[outputs]") {
  auto dir = test::temp_dir("twice");
  auto a = test::write_text(dir + "/a.toml", "[training]\nsteps = 3\n");
  auto b = test::write_text(dir + "/b.toml", "[training]\nsteps = 4\n");
  auto r = test::run_titan("--config " + a + " --config " + b);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("given twice") && Catch::Contains(a) && Catch::Contains(b));
}

TEST_CASE("outputs: boolean spellings mean the same with '=' and with a space", "[outputs]") {
  for (std::string spelling : {"true", "TRUE", "1", "yes", "Yes"}) {
    INFO(spelling);
    CHECK(parse({"--debug.deterministic=" + spelling}).debug.deterministic);
    CHECK(parse({"--debug.deterministic", spelling}).debug.deterministic);
  }
  for (std::string spelling : {"false", "False", "0", "no", "NO"}) {
    INFO(spelling);
    CHECK_FALSE(parse({"--debug.deterministic=" + spelling}).debug.deterministic);
    CHECK_FALSE(parse({"--debug.deterministic", spelling}).debug.deterministic);
  }
  auto r = test::run_titan("--debug.deterministic maybe");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unexpected argument 'maybe'"));
  r = test::run_titan("--debug.deterministic=maybe");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("expected bool, got \"maybe\""));
}

TEST_CASE("outputs: a run that fails to start leaves an earlier run's files untouched",
          "[outputs]") {
  auto dir = test::temp_dir("untouched");
  REQUIRE(test::run_titan(tiny_run(dir, 2)).exit_code == 0);
  const auto metrics = test::read_text(dir + "/metrics.jsonl");
  const auto fingerprint = test::read_text(dir + "/fingerprint.log");
  const auto config = test::read_text(dir + "/config.toml");
  // Found only when the data source is built, after the config passed validation.
  auto r = test::run_titan(
      tiny_run(dir, 2, "--training.dataset jsonl --training.dataset_path /nonexistent.jsonl"));
  CHECK(r.exit_code == 2);
  CHECK(test::read_text(dir + "/metrics.jsonl") == metrics);
  CHECK(test::read_text(dir + "/fingerprint.log") == fingerprint);
  CHECK(test::read_text(dir + "/config.toml") == config);
}

TEST_CASE("outputs: a second run into a locked dump folder exits 2 naming the holder's PID",
          "[outputs]") {
  auto dir = test::temp_dir("locked");
  auto r = test::run_shell(test::binary() + " " + tiny_run(dir, 100000) + " >/dev/null 2>&1 & " +
                           "first=$!; " + test::wait_for_line(dir + "/fingerprint.log", "step 1 ") +
                           test::binary() + " " + tiny_run(dir, 2) + " 2>&1; echo \"rc=$?\"; " +
                           "echo \"first=$first\"; kill -TERM $first; wait $first");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("rc=2") && Catch::Contains(dir + " is in use by another "
                                                                        "titan-train run (PID"));
  const auto first = r.output.substr(r.output.find("first=") + 6);
  CHECK_THAT(r.output, Catch::Contains("(PID " + first.substr(0, first.find('\n')) + ")"));
}

TEST_CASE("outputs: a failed write of fingerprint.log's header stops the run before step 1",
          "[outputs]") {
  // A full disk: a 12 KiB tmpfs holds the lock (a 4 KiB page) and config.toml (two pages: every
  // torchtitan key is written, about 4.6 KB), and nothing more. (titan-train refuses a link to
  // /dev/full, the easier stand-in, as any planted link.)
  if (::geteuid() != 0) TITAN_SKIP("SKIPPED: mounting a small tmpfs needs root");
  auto dir = test::temp_dir("full");
  REQUIRE(test::run_shell("mount -t tmpfs -o size=12k tmpfs " + dir + " 2>&1").exit_code == 0);
  auto r = test::run_titan(tiny_run(dir + "/run", 3));
  test::run_shell("umount " + dir);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output,
             Catch::Contains("cannot write " + dir + "/run/fingerprint.log: No space left"));
  CHECK_THAT(r.output, !Catch::Contains("step:  1"));
}

TEST_CASE("outputs: a write that fails part-way leaves only whole lines", "[outputs]") {
  auto dir = test::temp_dir("partial");
  const std::string path = dir + "/lines.txt";
  const std::string line(99, 'x');  // 100 bytes with its newline
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 250;  // the third line crosses the limit
  setrlimit(RLIMIT_FSIZE, &small);
  int written = 0;
  try {
    LineFile file(path, LineFile::Mode::kTruncate);
    for (; written < 5; ++written) file.write(line);
  } catch (const RuntimeFailure& e) {
    CHECK_THAT(e.what(), Catch::Contains("cannot write " + path));
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, previous_handler);
  CHECK(written == 2);
  CHECK(test::read_text(path) == line + "\n" + line + "\n");
}

TEST_CASE("outputs: a closed console pipe does not stop training", "[outputs]") {
  auto dir = test::temp_dir("sigpipe");
  auto r = test::run_shell("bash -c '" + test::binary() + " " + tiny_run(dir, 30) +
                           " --metrics.log_freq 1 2>" + dir +
                           "/stderr.txt | head -2 >/dev/null; echo rc=${PIPESTATUS[0]}'");
  CHECK_THAT(r.output, Catch::Contains("rc=0"));
  CHECK_THAT(test::read_text(dir + "/fingerprint.log"), Catch::Contains("\nstep 30 "));
  CHECK_THAT(test::read_text(dir + "/stderr.txt"), Catch::Contains("the console output failed"));
}

TEST_CASE("outputs: SIGTERM and SIGINT stop between steps, naming the signal and the last step",
          "[outputs]") {
  for (auto [name, code] : {std::pair<std::string, int>{"TERM", 143}, {"INT", 130}}) {
    INFO("SIG" << name);
    auto dir = test::temp_dir("signal_" + name);
    auto r = test::run_shell(test::binary() + " " + tiny_run(dir, 100000) + " >" + dir +
                             "/out.txt 2>&1 & pid=$!; " +
                             test::wait_for_line(dir + "/fingerprint.log", "step 3 ") + "kill -" +
                             name + " $pid; wait $pid; echo rc=$?");
    CHECK_THAT(r.output, Catch::Contains("rc=" + std::to_string(code)));
    auto out = test::read_text(dir + "/out.txt");
    CHECK_THAT(out, Catch::Contains("stopped by SIG" + name + " after step "));
    // The step it names is the last line of fingerprint.log.
    auto log = test::read_text(dir + "/fingerprint.log");
    auto last = log.substr(log.rfind("\nstep ") + 6);
    auto named = out.substr(out.find("after step ") + 11);
    CHECK(named.substr(0, named.find(';')) == last.substr(0, last.find(' ')));
  }
}

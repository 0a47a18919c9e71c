// Hostile runs against titan-train's outputs (issue 41, classes 4, 5, 9, 10 and 11): a link in
// the middle of an output path, two runs sharing one checkpoint folder, results written to a
// device that refuses them, TensorBoard history on resume, values that are not UTF-8, a report
// folder that cannot be written, and --print-config as the pre-check a run makes.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "catch_torch.h"
#include "metrics/tensorboard.h"
#include "test_util.h"
#include "util/files.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

// Every summary step recorded in the event files under `folder` (recursively), sorted, with
// repeats.
std::vector<int64_t> event_steps_under(const std::string& folder) {
  std::vector<int64_t> steps;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind("events.out.tfevents.", 0) != 0) continue;
    for (const auto& r : read_event_records(test::read_text(e.path().string())).records) {
      if (r.step > 0) steps.push_back(r.step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// A 4-step run with TensorBoard at every step and checkpoints at steps 2 and 4, whose step-4
// checkpoint is then removed: as if it was killed after logging step 4 and before saving it.
void run_four_steps_keep_checkpoint_two(const std::string& dir, const std::string& extra = "") {
  const auto r = test::run_titan_bounded(
      test::tiny_run(dir, 4,
                     "--metrics.enable_tensorboard --metrics.log_freq 1 --checkpoint.enable "
                     "--checkpoint.interval 2 --checkpoint.last_save_model_only false " +
                         extra));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  fs::remove_all(dir + "/checkpoint/step-4");
}

}  // namespace

TEST_CASE(
    "hostile outputs: a link in a middle component of an output folder inside the dump folder "
    "is refused before the first step, nothing written through it",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_middle_link");
  fs::create_directories(dir + "/outside");
  fs::create_directories(dir + "/o");
  fs::create_directory_symlink(dir + "/outside", dir + "/o/a");
  for (const std::string& flags :
       {std::string("--metrics.enable_tensorboard --metrics.save_tb_folder a/tb"),
        std::string("--checkpoint.enable --checkpoint.folder a/ck"),
        std::string("--job.save_config_file a/b/config.json")}) {
    const auto r = test::run_titan_bounded(test::tiny_run(dir + "/o", 2, flags));
    INFO(flags << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(dir + "/o/a: is a symbolic link, not a folder"));
    CHECK_THAT(r.output, !Catch::Contains("step:  1"));
    CHECK(fs::is_empty(dir + "/outside"));
  }
}

TEST_CASE(
    "hostile outputs: a second run into a live run's checkpoint folder, named absolutely, is "
    "refused with exit 2 naming the holder, whether the first run named it absolutely or "
    "relatively",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_shared_ckpt");
  const std::string shared = dir + "/shared";
  const std::string relative = dir + "/relative/first/checkpoint";  // the first run's default
  for (const auto& [case_dir, first_flags, checkpoints] :
       {std::tuple{dir + "/absolute", "--checkpoint.folder " + shared, shared},
        std::tuple{dir + "/relative", std::string(), relative}}) {
    const std::string saving = "--checkpoint.enable --checkpoint.interval 1000 ";
    // The first run trains long enough to be alive while the second starts; its fingerprint.log
    // appears once it holds its locks.
    const auto r = test::run_shell(fmt::format(
        "mkdir -p {2}; {0} {1} >{2}/first.out 2>&1 & first=$!; "
        "for i in $(seq 600); do [ -s {2}/first/fingerprint.log ] && break; sleep 0.1; done; "
        "timeout 120 {0} {3}; echo rc=$?; echo first=$first; kill -TERM $first; wait $first",
        test::binary(), test::tiny_run(case_dir + "/first", 100000, saving + first_flags) + " 2>&1",
        case_dir,
        test::tiny_run(case_dir + "/second", 2, saving + "--checkpoint.folder " + checkpoints) +
            " 2>&1"));
    INFO(r.output);
    const std::string pid = r.output.substr(r.output.find("first=") + 6);
    CHECK_THAT(r.output, Catch::Contains("rc=2"));
    CHECK_THAT(r.output, Catch::Contains("checkpoint.folder: " + checkpoints +
                                         " is in use by another titan-train run (PID " +
                                         pid.substr(0, pid.find('\n')) + ")"));
    CHECK_FALSE(fs::exists(case_dir + "/second/fingerprint.log"));
  }
}

TEST_CASE(
    "hostile outputs: a result that cannot be written to stdout is exit 1 with the reason on "
    "stderr",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_full_stdout");
  REQUIRE(test::run_titan_bounded(test::tiny_run(dir + "/a", 1)).exit_code == 0);
  for (const std::string& command :
       {fmt::format("{} compare {}/a {}/a --json", test::binary(), dir, dir),
        fmt::format("{} compare {}/a {}/a", test::binary(), dir, dir),
        fmt::format("{} --help", test::binary())}) {
    // stdout to /dev/full (every write fails with ENOSPC), stderr to the test.
    const auto r = test::run_shell(command + " 2>&1 >/dev/full; echo rc=$?");
    INFO(command << "\n" << r.output);
    CHECK_THAT(r.output, Catch::Contains("rc=1"));
    CHECK_THAT(r.output,
               Catch::Contains("titan-train: error: the result could not be written to stdout") &&
                   Catch::Contains("No space left on device"));
  }
}

TEST_CASE(
    "hostile outputs: a resume cuts TensorBoard history back to the checkpoint step whether "
    "or not this run writes TensorBoard",
    "[hostile][tensorboard]") {
  const auto dir = test::temp_dir("hostile_tb_off") + "/run";
  run_four_steps_keep_checkpoint_two(dir);
  REQUIRE(event_steps_under(dir + "/tb") == std::vector<int64_t>{1, 2, 3, 4});
  // Resumed from step 2 with TensorBoard off: steps 3 and 4 were abandoned.
  const auto r = test::run_titan_bounded(
      test::tiny_run(dir, 2, "--checkpoint.enable --checkpoint.interval 2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(event_steps_under(dir + "/tb") == std::vector<int64_t>{1, 2});
}

TEST_CASE(
    "hostile outputs: every rank's event files, also of ranks this run does not have, are cut "
    "back to the resume step",
    "[hostile][tensorboard]") {
  const auto tb = test::temp_dir("hostile_tb_ranks") + "/tb";
  SummaryValue loss;
  loss.tag = "loss";
  for (const char* folder : {"/20260101-0000", "/20260101-0000/rank_1", "/20260101-0000/rank_7"}) {
    TensorBoardWriter writer(tb + folder, 0);
    for (int64_t step = 1; step <= 4; ++step) writer.write(step, {loss});
  }
  CHECK(cut_tensorboard_history(tb, 2).empty());
  CHECK(event_steps_under(tb) == std::vector<int64_t>{1, 1, 1, 2, 2, 2});
}

TEST_CASE(
    "hostile outputs: a damaged TensorBoard record is named on resume and the records around "
    "it are kept",
    "[hostile][tensorboard]") {
  const auto dir = test::temp_dir("hostile_tb_flip") + "/run";
  run_four_steps_keep_checkpoint_two(dir);
  std::string events;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/tb"))
    if (e.is_regular_file()) events = e.path().string();
  std::string contents = test::read_text(events);
  const EventRecords records = read_event_records(contents);
  REQUIRE(records.records.size() == 5);  // file_version, steps 1-4
  // A byte of the data of the file_version record: before the fix the whole file went.
  contents[12 + 3] ^= 0x20;
  test::write_text(events, contents);
  const auto r = test::run_titan_bounded(
      test::tiny_run(dir, 4,
                     "--metrics.enable_tensorboard --metrics.log_freq 1 --checkpoint.enable "
                     "--checkpoint.interval 2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[titan] warning: " + events +
                                       ": the record at byte 0 fails its CRC"));
  CHECK(event_steps_under(dir + "/tb") == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE(
    "hostile outputs: a flag value that is not UTF-8 is refused before any output, naming "
    "the flag",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_utf8");
  // printf writes the bytes (/bin/sh has no $'...'): 0xff, and Latin-1's e-acute.
  for (const std::string& flag : {"--job.dump_folder \"$(printf '" + dir + "/x\\377')\"",
                                  std::string("--job.description \"$(printf 'caf\\351')\"")}) {
    const auto r = test::run_shell(fmt::format("{} {} {} 2>&1; echo rc=$?", test::binary(),
                                               test::tiny_run(dir + "/run", 1), flag));
    INFO(r.output);
    CHECK_THAT(r.output, Catch::Contains("rc=2") &&
                             Catch::Contains("command line: " + flag.substr(0, flag.find(' '))) &&
                             Catch::Contains("is not valid UTF-8"));
  }
  CHECK(fs::is_empty(dir));
}

TEST_CASE("hostile outputs: a report folder that cannot be written names the real reason",
          "[hostile]") {
  // As root, permissions bind nobody: run as the unprivileged user instead.
  const std::string as_user =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  if (!as_user.empty() && test::run_shell("command -v setpriv").exit_code != 0) {
    TITAN_SKIP("running as root without setpriv: a read-only folder cannot be made to refuse");
  }
  const auto dir = test::temp_dir("hostile_readonly") + "/run";
  fs::create_directories(dir + "/rerun");
  if (!as_user.empty())
    test::run_shell("chown -R 65534:65534 " + fs::path(dir).parent_path().string());
  fs::permissions(dir + "/rerun", fs::perms::owner_read | fs::perms::owner_exec);
  const auto r = test::run_shell(fmt::format("{}{} {} 2>&1; echo rc=$?", as_user, test::binary(),
                                             test::tiny_run(dir, 2, "--debug.rerun_steps 1")));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("rc=1") && Catch::Contains("Permission denied") &&
                           !Catch::Contains("No such file or directory"));
}

TEST_CASE(
    "hostile outputs: --print-config refuses what a run refuses, with the same message and "
    "exit code, and leaves the datasets' files to the run",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_print_config");
  const std::string world2 = "WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"WORLD_SIZE=3 RANK=0 MASTER_ADDR=127.0.0.1", "--parallelism.data_parallel_shard_degree 2"},
      {world2, "--debug.precision_steps 1"},
      {world2, "--checkpoint.enable --checkpoint.create_seed_checkpoint"},
      {"RANK=0", ""},
  };
  for (const auto& [env, flags] : cases) {
    const auto printed =
        test::run_titan_env(env, test::tiny_run(dir + "/run", 1, flags) + " --print-config");
    const auto run = test::run_titan_env(env, test::tiny_run(dir + "/run", 1, flags));
    INFO(flags << "\n" << printed.output << "\n" << run.output);
    CHECK(printed.exit_code == 2);
    CHECK(run.exit_code == 2);
    CHECK(printed.output == run.output);
  }
  CHECK_FALSE(fs::exists(dir + "/run"));
  // The datasets' files are the run's to find, not --print-config's (torchtitan's configs name
  // data that is seldom where the config is checked): the run refuses them before any output.
  for (const std::string& flags :
       {"--training.dataset text --training.dataset_path " + dir + "/missing.txt",
        "--validation.enable --validation.seq_len 16 --validation.dataset jsonl "
        "--validation.dataset_path " +
            dir}) {
    const auto printed =
        test::run_titan(test::tiny_run(dir + "/run", 1, flags) + " --print-config");
    const auto run = test::run_titan(test::tiny_run(dir + "/run", 1, flags));
    INFO(flags << "\n" << printed.output << "\n" << run.output);
    CHECK(printed.exit_code == 0);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, Catch::Contains(".dataset_path"));
    CHECK_FALSE(fs::exists(dir + "/run"));
  }
}

TEST_CASE(
    "hostile outputs: a save never replaces a step-N that the checkpoint listing skipped: exit 2 "
    "at start when the save step is known, exit 1 when it appears during the run",
    "[hostile][checkpoint]") {
  const auto dir = test::temp_dir("hostile_skipped_step");
  const std::string flags = "--checkpoint.enable --checkpoint.interval 2";
  // A plain file and a folder without a manifest where saves of steps 2 and 4 would go.
  fs::create_directories(dir + "/run/checkpoint/step-4");
  test::write_text(dir + "/run/checkpoint/step-2", "mine");
  test::write_text(dir + "/run/checkpoint/step-4/notes.txt", "also mine");
  for (const int steps : {2, 4}) {
    fs::remove(dir + "/run/checkpoint/step-2");
    if (steps == 2) test::write_text(dir + "/run/checkpoint/step-2", "mine");
    const auto r = test::run_titan(test::tiny_run(dir + "/run", steps, flags));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(fmt::format("{}/run/checkpoint/step-{}: the save of step "
                                                     "{} would replace it, and it is not a "
                                                     "checkpoint",
                                                     dir, steps, steps)));
    CHECK_FALSE(fs::exists(dir + "/run/fingerprint.log"));
  }
  CHECK(test::read_text(dir + "/run/checkpoint/step-4/notes.txt") == "also mine");
  // One that appears once the run trains: the save of its step fails naming it, and nothing is
  // removed (the save's temporary folder included).
  const auto r = test::run_shell(fmt::format(
      "{0} {1} --config {2}/configs/debug_model.toml --training.seq_len 512 "
      "--training.local_batch_size 2 --training.steps 6 --checkpoint.interval 6 "
      "--job.dump_folder {3}/late >{3}/late.out 2>&1 & p=$!; "
      "for i in $(seq 1200); do grep -q 'step:  1' {3}/late.out && break; sleep 0.1; done; "
      "mkdir -p {3}/late/checkpoint/step-6; echo mine >{3}/late/checkpoint/step-6/notes.txt; "
      "wait $p; echo rc=$?; cat {3}/late.out; ls -A {3}/late/checkpoint",
      test::binary(), flags, test::source_dir(), dir));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("rc=1"));
  CHECK_THAT(r.output, Catch::Contains("cannot save step 6: " + dir +
                                       "/late/checkpoint/step-6 is in the way and is not a "
                                       "checkpoint (incomplete: no manifest.txt)"));
  CHECK(test::read_text(dir + "/late/checkpoint/step-6/notes.txt") == "mine\n");
  CHECK_THAT(r.output, !Catch::Contains(".tmp"));
}

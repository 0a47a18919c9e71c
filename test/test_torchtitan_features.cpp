// What torchtitan's keys make titan-train do: validation, profiling traces, the c4 datasets from
// local files, and the checkpoint keys (exclude_from_loading, load_only,
// enable_first_step_checkpoint, create_seed_checkpoint, initial_load_model_only).
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "catch_torch.h"
#include "test_util.h"
#include "util/json_cursor.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// A small corpus in the c4 layout (JSON lines with "text", "timestamp" and "url").
std::string c4_lines(int documents) {
  std::string out;
  for (int d = 0; d < documents; ++d) {
    std::string text;
    for (int w = 0; w < 20 + (d * 7) % 60; ++w)
      text += (w ? " " : "") + std::string("word") + std::to_string((d * 31 + w * 17) % 97);
    out += "{\"text\": \"" + text +
           "\", \"timestamp\": \"2019-04-25T00:00:00Z\", \"url\": "
           "\"https://example.com/" +
           std::to_string(d) + "\"}\n";
  }
  return out;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// metrics.jsonl's validation losses, by step.
std::map<int64_t, std::string> validation_losses(const std::string& path) {
  std::map<int64_t, std::string> out;
  std::regex line("\\{\"step\": (\\d+), \"validation_loss\": ([^,]+),");
  std::istringstream in(test::read_text(path));
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) out[std::stoll(m[1])] = m[2];
  }
  return out;
}

}  // namespace

TEST_CASE(
    "c4: .json.gz shards read the same documents as the same text uncompressed, and a "
    "missing path names what to put there",
    "[data][torchtitan]") {
  const auto dir = test::temp_dir("c4");
  fs::create_directories(dir + "/plain");
  fs::create_directories(dir + "/gz");
  const std::string first = c4_lines(120), second = c4_lines(40);
  test::write_text(dir + "/plain/c4-train.00000-of-00002.json", first);
  test::write_text(dir + "/plain/c4-train.00001-of-00002.json", second);
  write_gzip(dir + "/gz/c4-train.00000-of-00002.json.gz", first);
  write_gzip(dir + "/gz/c4-train.00001-of-00002.json.gz", second);
  auto plain = test::run_titan(test::tiny_run_seq32(
      dir + "/a", 3, "--training.dataset c4 --training.dataset_path " + dir + "/plain"));
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.output, Catch::Contains("(2 files, 160 documents)"));
  auto gz = test::run_titan(test::tiny_run_seq32(
      dir + "/b", 3, "--training.dataset c4 --training.dataset_path " + dir + "/gz"));
  REQUIRE(gz.exit_code == 0);
  CHECK(test::fingerprint_step_lines(dir + "/a/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/b/fingerprint.log"));
  // c4_test's default path is relative to the working directory, as torchtitan's.
  auto missing =
      test::run_shell("cd " + dir + " && " + test::binary() + " " +
                      test::tiny_run_seq32(dir + "/c", 1, "--training.dataset c4_test") + " 2>&1");
  CHECK_THAT(missing.output, Catch::Contains("dataset \"c4_test\" reads tests/assets/c4_test "
                                             "(its default path), which does not exist") &&
                                 Catch::Contains("tests/assets/c4_test/data.json"));
  CHECK_FALSE(fs::exists(dir + "/c"));
  fs::create_directories(dir + "/tests/assets/c4_test");
  test::write_text(dir + "/tests/assets/c4_test/data.json", first);
  auto found =
      test::run_shell("cd " + dir + " && " + test::binary() + " " +
                      test::tiny_run_seq32(dir + "/d", 1, "--training.dataset c4_test") + " 2>&1");
  CHECK_THAT(found.output, Catch::Contains("data: c4_test tests/assets/c4_test (1 files, 120"));
  // A corrupt shard is named.
  std::string bytes = test::read_text(dir + "/gz/c4-train.00000-of-00002.json.gz");
  bytes.resize(bytes.size() / 2);
  test::write_text(dir + "/gz/c4-train.00000-of-00002.json.gz", bytes);
  auto cut = test::run_titan(test::tiny_run_seq32(
      dir + "/e", 1, "--training.dataset c4 --training.dataset_path " + dir + "/gz"));
  CHECK(cut.exit_code == 2);
  CHECK_THAT(cut.output, Catch::Contains("c4-train.00000-of-00002.json.gz: cannot decompress"));
}

TEST_CASE(
    "validation: no training bit changes, its losses are logged, and a resumed run "
    "validates on the same batches",
    "[validation][torchtitan]") {
  const auto dir = test::temp_dir("validation");
  fs::create_directories(dir + "/val");
  test::write_text(dir + "/val/data.json", c4_lines(200));
  const std::string validate =
      "--validation.enable --validation.dataset c4_validation --validation.dataset_path " + dir +
      "/val --validation.freq 2 --validation.steps 3 --validation.local_batch_size 2 "
      "--validation.seq_len 32 --metrics.enable_tensorboard --lr_scheduler.total_steps 6";
  // One schedule for every run: a run stopped at step 3 resumes into the same learning rates.
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/plain", 6, "--lr_scheduler.total_steps 6"))
              .exit_code == 0);
  auto straight = test::run_titan(test::tiny_run_seq32(dir + "/straight", 6, validate));
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  CHECK(test::read_text(dir + "/plain/fingerprint.log") ==
        test::read_text(dir + "/straight/fingerprint.log"));
  CHECK_THAT(straight.output, Catch::Contains("validate step:  2  loss: ") &&
                                  Catch::Contains("[titan] validation: "));
  const auto losses = validation_losses(dir + "/straight/metrics.jsonl");
  CHECK(losses.size() == 4);  // steps 1, 2, 4, 6
  // Stopped after step 3 (a checkpoint), resumed to 6: validates on the same batches.
  const std::string ckpt =
      " --checkpoint.enable --checkpoint.interval 3 --checkpoint.last_save_model_only false";
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/resumed", 3, validate + ckpt)).exit_code ==
          0);
  auto resumed = test::run_titan(test::tiny_run_seq32(dir + "/resumed", 6, validate + ckpt));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(validation_losses(dir + "/resumed/metrics.jsonl") == losses);
  CHECK(test::fingerprint_step_lines(dir + "/resumed/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/plain/fingerprint.log"));
}

TEST_CASE(
    "validation: SIGTERM during a validation ends it before its next batch, unlogged, and the "
    "run saves and stops after that step, and a validation batch too large for memory is exit 2 "
    "at start",
    "[validation][torchtitan][hostile]") {
  const auto dir = test::temp_dir("validation_stop");
  fs::create_directories(dir + "/val");
  test::write_text(dir + "/val/data.json", c4_lines(200));
  // Every step validates on the whole set (about a second): a SIGTERM sent once step 1 is done
  // lands in a step or in a validation, and either way the validation after that step sees it
  // before a batch.
  const std::string validate =
      "--validation.enable --validation.dataset c4_validation --validation.dataset_path " + dir +
      "/val --validation.freq 1 --validation.steps -1 --validation.local_batch_size 4 "
      "--validation.seq_len 32 --checkpoint.enable --checkpoint.interval 1000000";
  const std::string run = test::tiny_run_seq32(dir + "/out", 1000000, validate);
  const auto r =
      test::run_shell("cd " + dir + "; " + test::binary() + " " + run + " >run.out 2>&1 & p=$!; " +
                      test::wait_for_line(dir + "/out/fingerprint.log", "step 1 ") +
                      "kill -TERM $p; wait $p; echo \"rc $?\"");
  const std::string out = test::read_text(dir + "/run.out");
  INFO(r.output << out);
  CHECK_THAT(r.output, Catch::Contains("rc 0"));
  std::smatch m;
  REQUIRE(std::regex_search(
      out, m,
      std::regex(
          R"(validation after step (\d+) stopped by SIGTERM after (\d+) batches: not logged)")));
  const std::string step = m[1];
  CHECK_THAT(out, Catch::Contains("stopped by SIGTERM after step " + step));
  CHECK_THAT(out, !Catch::Contains("validate step: " + std::string(step.size() < 2 ? " " : "") +
                                   step + "  loss"));
  CHECK(fs::exists(dir + "/out/checkpoint/step-" + step));

  // 2^20 sequences of 2048 tokens: terabytes of logits, whatever the machine.
  const auto big = test::run_titan(test::tiny_run(
      dir + "/big", 2,
      "--training.seq_len 2048 --validation.enable --validation.dataset c4_validation "
      "--validation.dataset_path " +
          dir + "/val --validation.local_batch_size 1048576"));
  INFO(big.output);
  CHECK(big.exit_code == 2);
  CHECK_THAT(big.output,
             Catch::Contains("validation.local_batch_size x validation.seq_len: a validation "
                             "batch of 1048576 x 2048 tokens needs at least "));
  CHECK_FALSE(fs::exists(dir + "/big"));
}

TEST_CASE(
    "profiling: a trace is valid JSON with one span per block per profiled step, from "
    "either recorder",
    "[profiling][torchtitan]") {
  const auto dir = test::temp_dir("profiling");
  const std::string profile =
      "--activation_checkpoint.mode none --profiling.enable_profiling --profiling.profile_freq 3 "
      "--profiling.profiler_warmup 1 --profiling.profiler_active 2";
  for (const std::string env : {"", "TITAN_PROFILER=titan"}) {
    const std::string run = dir + (env.empty() ? "/libtorch" : "/titan");
    auto r = test::run_titan_env(env, test::tiny_run_seq32(run, 6, profile));
    INFO(env << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    for (int step : {3, 6}) {
      const std::string path =
          run + "/profile_traces/iteration_" + std::to_string(step) + "/rank0_trace.json";
      REQUIRE(fs::exists(path));
      const std::string trace = test::read_text(path);
      JsonCursor cur(trace);
      CHECK_NOTHROW(cur.skip_value());
      CHECK(cur.at_end());
      // The tiny model has 2 blocks; 2 steps are recorded in each window.
      for (const char* block : {"layers.0", "layers.1"}) {
        const std::regex span(std::string("\"cat\": \"user_annotation\", \"name\": \"") + block +
                              "\"");
        const auto spans = std::distance(std::sregex_iterator(trace.begin(), trace.end(), span),
                                         std::sregex_iterator());
        CHECK(spans == 2);
      }
      CHECK_THAT(trace, Catch::Contains("\"cat\": \"cpu_op\", \"name\": \"aten::"));
    }
    CHECK_FALSE(fs::exists(run + "/profile_traces/iteration_1"));
    CHECK_THAT(r.output, Catch::Contains(env.empty() ? "from libtorch's profiler"
                                                     : "from titan-train's op recorder"));
  }
  CHECK(test::fingerprint_step_lines(dir + "/libtorch/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/titan/fingerprint.log"));
  auto small = test::run_titan(test::tiny_run_seq32(
      dir + "/bad", 1, "--profiling.enable_profiling --profiling.profile_freq 2"));
  CHECK(small.exit_code == 2);
  CHECK_THAT(
      small.output,
      Catch::Contains(
          "profiling.profile_freq: 2 is shorter than profiler_warmup + profiler_active = 4"));
  auto snapshot = test::run_titan(
      test::tiny_run_seq32(dir + "/snapshot", 1, "--profiling.enable_memory_snapshot"));
  CHECK_THAT(snapshot.output, Catch::Contains("memory snapshot: CUDA-only"));
}

TEST_CASE(
    "checkpoint keys: exclude_from_loading, load_only, enable_first_step_checkpoint, "
    "create_seed_checkpoint, initial_load_model_only",
    "[checkpoint][torchtitan]") {
  const auto dir = test::temp_dir("ckpt_keys");
  // One schedule for every run: a run stopped at step 2 resumes into the same learning rates.
  const std::string full =
      " --checkpoint.enable --checkpoint.interval 2 --checkpoint.last_save_model_only false "
      "--lr_scheduler.total_steps 4";
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/straight", 4, full)).exit_code == 0);
  // A resume that leaves out the optimizer's and the data's state parts from the straight run;
  // one that loads everything does not.
  for (const std::string part : {"optimizer", "dataloader"}) {
    const std::string run = dir + "/" + part;
    REQUIRE(test::run_titan(test::tiny_run_seq32(run, 2, full)).exit_code == 0);
    auto r = test::run_titan(
        test::tiny_run_seq32(run, 4, full + " --checkpoint.exclude_from_loading " + part));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("not loaded: " + part));
    CHECK(test::fingerprint_step_lines(run + "/fingerprint.log") !=
          test::fingerprint_step_lines(dir + "/straight/fingerprint.log"));
  }
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/all", 2, full)).exit_code == 0);
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/all", 4, full)).exit_code == 0);
  CHECK(test::fingerprint_step_lines(dir + "/all/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/straight/fingerprint.log"));
  auto bad = test::run_titan(
      test::tiny_run_seq32(dir + "/bad", 1, full + " --checkpoint.exclude_from_loading optimiser"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("did you mean \"optimizer\"?"));
  // load_only writes no checkpoint; enable_first_step_checkpoint adds step-1.
  REQUIRE(
      test::run_titan(test::tiny_run_seq32(dir + "/load_only", 2, full + " --checkpoint.load_only"))
          .exit_code == 0);
  CHECK_FALSE(fs::exists(dir + "/load_only/checkpoint"));
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/first", 3,
                                               full + " --checkpoint.enable_first_step_checkpoint"))
              .exit_code == 0);
  CHECK(fs::exists(dir + "/first/checkpoint/step-1"));
  // A seed checkpoint: step-0 with the initial weights, no step trained; a run resumes from it at
  // step 0 as from the same weights through initial_load_path.
  auto seed = test::run_titan(test::tiny_run_seq32(
      dir + "/seed", 3, "--checkpoint.enable --checkpoint.create_seed_checkpoint"));
  INFO(seed.output);
  REQUIRE(seed.exit_code == 0);
  CHECK(fs::exists(dir + "/seed/checkpoint/step-0"));
  CHECK_FALSE(fs::exists(dir + "/seed/checkpoint/step-1"));
  auto from_seed = test::run_titan(
      test::tiny_run_seq32(dir + "/seed", 3, "--checkpoint.enable --debug.seed 99"));
  REQUIRE(from_seed.exit_code == 0);
  CHECK_THAT(from_seed.output, Catch::Contains("is a seed checkpoint"));
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/initial", 3,
                                               "--debug.seed 99 --checkpoint.initial_load_path " +
                                                   dir + "/seed/checkpoint/step-0"))
              .exit_code == 0);
  CHECK(test::fingerprint_step_lines(dir + "/seed/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/initial/fingerprint.log"));
  // initial_load_model_only = false: the whole state, step included.
  auto whole = test::run_titan(test::tiny_run_seq32(
      dir + "/whole", 4,
      "--lr_scheduler.total_steps 4 --checkpoint.initial_load_model_only false "
      "--checkpoint.initial_load_path " +
          dir + "/straight/checkpoint/step-2"));
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  const std::string lines = test::fingerprint_step_lines(dir + "/whole/fingerprint.log");
  CHECK(lines.rfind("step 3 ", 0) == 0);
  const std::string straight = test::fingerprint_step_lines(dir + "/straight/fingerprint.log");
  CHECK(straight.substr(straight.find("step 3 ")) == lines);
}

}  // namespace titan

// The rerun check: a step re-executed from its kept state says whether its trouble is
// reproducible (data, model state) or not (nondeterminism, a transient fault), and names the op.
#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "analysis/fingerprint_reader.h"
#include "catch_torch.h"
#include "config/loader.h"
#include "fault_injection.h"
#include "instruments/numerics_trace.h"
#include "test_util.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace titan;

namespace {

Config rerun_config(const std::string& dir, int64_t steps = 4) {
  Config c;
  c.job.dump_folder = dir;
  c.model.flavor = "tiny";
  c.training.local_batch_size = 2;
  c.training.seq_len = 32;
  c.training.steps = steps;
  c.training.device = DeviceChoice::kCpu;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = AcMode::kNone;
  c.debug.seed = 5;
  return c;
}

std::string report_of(const std::string& dir, int64_t step) {
  return test::read_text(fmt::format("{}/rerun/step{}.txt", dir, step));
}

// The message train() fails with, or "" when it finishes.
std::string train_error(test::InProcessRun& run) {
  try {
    run.trainer->train();
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rerun: an infinity planted in layers.1 at step 3 is reproducible, its op named",
          "[rerun]") {
  for (AcMode mode : {AcMode::kNone, AcMode::kFull}) {
    auto dir = test::temp_dir(fmt::format("rerun_inf_{}", to_string(mode)));
    Config c = rerun_config(dir);
    c.debug.rerun_on = RerunOn::kNan;
    c.activation_checkpoint.mode = mode;
    c.activation_checkpoint.determinism_check = RecomputeCheck::kBitwise;
    auto run = test::start_run(c);
    run->run->instrument<NumericsTracer>()->set_block_output_hook(test::infinity_fault(3, 1));
    const std::string error = train_error(*run);
    INFO("AC " << to_string(mode) << "\n" << run->log.str());
    CHECK_THAT(error, Catch::Contains("step 3") && Catch::Contains("reproducible") &&
                          Catch::Contains("op layers.1 #") && Catch::Contains("aten::add"));
    const std::string report = report_of(dir, 3);
    CHECK_THAT(report, Catch::Contains("trigger: nan") &&
                           Catch::Contains("outcome: reproducible\n") &&
                           Catch::Contains("cause: the data or the model state"));
    CHECK_THAT(report,
               Catch::Matches("[\\s\\S]*first non-finite output \\(forward order\\): op layers\\.1 "
                              "#[0-9]+ aten::add\n[\\s\\S]*"));
    CHECK_THAT(report, Catch::Contains("original re-executed (traced)") &&
                           Catch::Contains("rerun ") && Catch::Contains("document "));
    CHECK_THAT(run->log.str(), Catch::Contains("report " + dir + "/rerun/step3.txt"));
    // The steps before it were logged; the failing step's line is not.
    auto fp = read_fingerprint_log(dir + "/fingerprint.log");
    CHECK(fp.steps.size() == 2);
  }
}

TEST_CASE("rerun: a one-shot perturbation of a traced step is not reproducible, its op named",
          "[rerun]") {
  auto dir = test::temp_dir("rerun_once");
  Config c = rerun_config(dir);
  c.debug.rerun_steps = {3};
  auto run = test::start_run(c);
  run->run->instrument<NumericsTracer>()->set_block_output_hook(
      test::ulp_perturbation(3, 0, 1, true));
  CHECK(train_error(*run).empty());
  const std::string report = report_of(dir, 3);
  CHECK_THAT(report, Catch::Contains("outcome: not reproducible\n") &&
                         Catch::Contains("debug.deterministic was off"));
  CHECK_THAT(report, Catch::Matches("[\\s\\S]*first difference \\(step 3\\): op layers\\.0 #[0-9]+ "
                                    "aten::nextafter\n    original: f32\\[2,32,64\\] checksum "
                                    "[0-9a-f]{16}[\\s\\S]*\n    rerun: f32[\\s\\S]*"));
  // "stop" on a requested step goes on with the original's result: the run finishes.
  CHECK_THAT(report, Catch::Contains("action: stop: the original's result is kept"));
  CHECK(read_fingerprint_log(dir + "/fingerprint.log").steps.size() == 4);
}

TEST_CASE("rerun: a one-shot infinity under rerun_on nan is transient, and continue goes on",
          "[rerun]") {
  auto dir = test::temp_dir("rerun_transient");
  Config c = rerun_config(dir);
  c.debug.rerun_on = RerunOn::kNan;
  c.debug.rerun_action = RerunAction::kContinue;
  auto run = test::start_run(c);
  run->run->instrument<NumericsTracer>()->set_block_output_hook(test::infinity_fault(3, 0, true));
  CHECK(train_error(*run).empty());  // the rerun's finite result was kept
  const std::string report = report_of(dir, 3);
  CHECK_THAT(report, Catch::Contains("outcome: not reproducible\n") &&
                         Catch::Contains("was not traced (a one-time fault)") &&
                         Catch::Contains("debug.rerun_steps"));
  CHECK_THAT(report, Catch::Contains("action: continue"));
  // The kept result is the rerun's, which equals an unperturbed run's step 3.
  auto clean_dir = test::temp_dir("rerun_transient_clean");
  test::start_run(rerun_config(clean_dir))->trainer->train();
  CHECK(test::read_text(dir + "/fingerprint.log") ==
        test::read_text(clean_dir + "/fingerprint.log"));
}

TEST_CASE("rerun: rerun_steps on a deterministic run is reproducible and changes no fingerprint",
          "[rerun][fingerprint]") {
  auto dir = test::temp_dir("rerun_steps");
  auto plain = test::run_titan(test::tiny_run(dir + "/plain", 5, "--debug.deterministic true"));
  REQUIRE(plain.exit_code == 0);
  auto rerun = test::run_titan(test::tiny_run(
      dir + "/rerun", 5,
      "--debug.deterministic true --debug.rerun_steps 2,4 --activation_checkpoint.mode full "
      "--activation_checkpoint.determinism_check bitwise"));
  INFO(rerun.output);
  REQUIRE(rerun.exit_code == 0);
  for (int step : {2, 4}) {
    CHECK_THAT(report_of(dir + "/rerun", step), Catch::Contains("outcome: reproducible\n"));
  }
  CHECK_FALSE(std::filesystem::exists(dir + "/rerun/rerun/step3.txt"));
  CHECK_THAT(rerun.output, Catch::Contains("rerun check: state kept before 2 steps") &&
                               Catch::Contains("% of the mean step time; 2 reruns"));
  // AC changes the config hash line only: every other line is the same.
  auto without_hash = [](const std::string& path) {
    std::istringstream in(test::read_text(path));
    std::string out;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("config_hash ", 0) != 0) out += line + "\n";
    }
    return out;
  };
  const std::string plain_text = without_hash(dir + "/plain/fingerprint.log");
  CHECK(plain_text == without_hash(dir + "/rerun/fingerprint.log"));
  CHECK(read_fingerprint_log(dir + "/rerun/fingerprint.log").steps.size() == 5);
}

TEST_CASE("rerun: skip leaves the parameters and the optimizer state as before the step",
          "[rerun]") {
  auto dir = test::temp_dir("rerun_skip");
  Config c = rerun_config(dir);
  c.debug.rerun_steps = {3};
  c.debug.rerun_action = RerunAction::kSkip;
  auto run = test::start_run(c);
  run->trainer->train_step();
  run->trainer->train_step();
  Snapshot before = run->trainer->engine().snapshot();
  StepOutcome skipped = run->trainer->train_step();
  CHECK(skipped.skipped);
  Snapshot after = run->trainer->engine().snapshot();
  CHECK(after.state.step == 3);
  CHECK_FALSE(after.state.loader == before.state.loader);  // its batch was consumed
  REQUIRE(after.module_tensors.size() == before.module_tensors.size());
  for (size_t i = 0; i < before.module_tensors.size(); ++i) {
    CHECK(at::equal(before.module_tensors[i], after.module_tensors[i]));
  }
  REQUIRE(after.optimizer.size() == before.optimizer.size());
  for (size_t i = 0; i < before.optimizer.size(); ++i) {
    REQUIRE(after.optimizer[i].has_value());
    CHECK(after.optimizer[i]->step == before.optimizer[i]->step);
    CHECK(at::equal(after.optimizer[i]->exp_avg, before.optimizer[i]->exp_avg));
    CHECK(at::equal(after.optimizer[i]->exp_avg_sq, before.optimizer[i]->exp_avg_sq));
  }
  run->trainer->train_step();
  auto fp = read_fingerprint_log(dir + "/fingerprint.log");
  REQUIRE(fp.steps.size() == 4);
  CHECK(fp.steps[2].params == fp.steps[1].params);  // step 3 changed nothing
  CHECK(fp.steps[3].params != fp.steps[2].params);
  CHECK_THAT(report_of(dir, 3), Catch::Contains("action: skip"));
}

TEST_CASE("rerun: a batch of one repeated token is a spike, and its documents are named",
          "[rerun][data]") {
  auto dir = test::temp_dir("rerun_spike");
  // 33-token documents (BOS, 31 bytes, EOS): one per sequence. Documents 20 and 21, the batch of
  // step 11, repeat one byte after ten steps of "abab...".
  std::string abab, jsonl;
  for (int i = 0; i < 31; ++i) abab += i % 2 ? 'b' : 'a';
  for (int i = 0; i < 32; ++i) {
    jsonl +=
        fmt::format("{{\"text\": \"{}\"}}\n", i == 20 || i == 21 ? std::string(31, 'z') : abab);
  }
  test::write_text(dir + "/data.jsonl", jsonl);
  auto r = test::run_titan(
      "--model.flavor tiny --training.device cpu --training.steps 12 --training.seq_len 32 "
      "--training.local_batch_size 2 --debug.seed 3 --training.dataset jsonl "
      "--training.dataset_path " +
      dir + "/data.jsonl --optimizer.lr 0.01 --lr_scheduler.warmup_steps 1 " +
      "--debug.rerun_on spike --debug.rerun_window 3 --job.dump_folder " + dir + "/out");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);  // "stop" goes on after a spike
  CHECK_THAT(r.output, Catch::Contains("rerun check: step 11 (spike): reproducible"));
  const std::string report = report_of(dir + "/out", 11);
  CHECK_THAT(report, Catch::Contains("trigger: spike: loss") &&
                         Catch::Contains("mean of the last 3 losses"));
  CHECK_THAT(report, Catch::Contains("sequence 0: loss") &&
                         Catch::Contains("document 20 tokens [0, 33)") &&
                         Catch::Contains("document 21 tokens [0, 33)"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out/rerun/step10.txt"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out/rerun/step12.txt"));
}

TEST_CASE("rerun: a planted link where the reports go is refused at start, before any output",
          "[rerun][hostile]") {
  const std::string dir = test::temp_dir("rerun_link");
  std::filesystem::create_directories(dir + "/run");
  std::filesystem::create_directory_symlink(dir, dir + "/run/rerun");
  auto r = test::run_titan(test::tiny_run(dir + "/run", 2, "--debug.rerun_on nan"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("rerun: is a symbolic link"));
  CHECK_FALSE(std::filesystem::exists(dir + "/run/fingerprint.log"));
  // Armed without a link: the folder is there from the start, empty until a trigger fires.
  auto armed = test::run_titan(test::tiny_run(dir + "/plain", 2, "--debug.rerun_on nan"));
  REQUIRE(armed.exit_code == 0);
  CHECK(std::filesystem::is_directory(dir + "/plain/rerun"));
  CHECK(std::filesystem::is_empty(dir + "/plain/rerun"));
}

TEST_CASE("rerun: the keys parse from TOML and flags, and bad values name the key",
          "[rerun][config]") {
  Config c;
  apply_toml(c,
             "[debug]\nrerun_on = \"both\"\nrerun_steps = [100, 200]\nrerun_window = 5\n"
             "rerun_spike_factor = 2.5\nrerun_action = \"skip\"\n",
             "t.toml");
  CHECK(c.debug.rerun_on == RerunOn::kBoth);
  CHECK(c.debug.rerun_steps == std::vector<int64_t>{100, 200});
  CHECK(c.debug.rerun_window == 5);
  CHECK(c.debug.rerun_spike_factor == 2.5);
  CHECK(c.debug.rerun_action == RerunAction::kSkip);
  auto error_of = [](const std::string& toml) {
    Config x;
    try {
      apply_toml(x, toml, "t.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("[debug]\nrerun_steps = [1, \"2\"]\n"),
             Catch::StartsWith("t.toml:2:15") && Catch::Contains("expected integer list"));
  CHECK_THAT(error_of("[debug]\nrerun_steps = [3, 0]\n"),
             Catch::Contains("debug.rerun_steps = [3, 0]: 0 is out of range"));
  CHECK_THAT(error_of("[debug]\nrerun_spike_factor = 1.0\n"), Catch::Contains("> 1"));
  CHECK_THAT(error_of("[debug]\nrerun_on = \"spikes\"\n"),
             Catch::Contains("\"spikes\" is not allowed"));

  Config late;
  late.training.steps = 10;
  late.debug.rerun_steps = {5, 50};
  auto warnings = config_warnings(late);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("debug.rerun_steps: step 50 is after training.steps "
                                          "(10): it is never rerun"));

  auto flag = test::run_titan(test::tiny_run(test::temp_dir("rerun_flags") + "/out", 1) +
                              " --debug.rerun_steps 100,200 --print-config");
  CHECK(flag.exit_code == 0);
  CHECK_THAT(flag.output, Catch::Contains("rerun_steps = [100, 200]"));
  // One folder, made once: a second temp_dir call would empty it and hide what the run left.
  const std::string bad_dir = test::temp_dir("rerun_flags_bad");
  auto bad = test::run_titan(test::tiny_run(bad_dir + "/out", 1) + " --debug.rerun_steps 1,x");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("debug.rerun_steps: expected integer list, got \"1,x\""));
  CHECK_THAT(bad.output, Catch::Contains("for example --debug.rerun_steps=100,200"));
  CHECK_FALSE(std::filesystem::exists(bad_dir + "/out"));
}

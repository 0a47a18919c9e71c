// `titan-train compare`: identical runs pass, the first differing step and field are named,
// thread counts are told apart down to the gradient, bad files name their line, --tolerance and
// --json behave.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "catch_torch.h"
#include "metrics/fingerprint.h"
#include "test_util.h"

using namespace titan;

namespace {

const std::string kTiny =
    "--model.flavor tiny --training.seq_len 32 --training.local_batch_size 2 --training.steps 4 "
    "--training.device cpu --activation_checkpoint.mode none --lr_scheduler.warmup_steps 2 "
    "--debug.seed 11 ";

void train(const std::string& args, const std::string& dir) {
  auto r = test::run_titan(kTiny + args + " --job.dump_folder " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

test::RunResult compare(const std::string& args) { return test::run_titan("compare " + args); }

// Runs `python3 -c program` on `input` (stdin); returns its stdout, or "" without python3.
std::string python(const std::string& program, const std::string& input_path) {
  std::string command = "python3 -c '" + program + "' < " + input_path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// A fingerprint.log with `losses` (one step each) written by the real formatter.
std::string fingerprint_text(const std::vector<double>& losses) {
  FingerprintHeader header;
  header.device_type = "cpu";
  header.device_name = "test cpu";
  header.config_hash = 0x1234;
  header.attention_kernel = header.swiglu_kernel = header.rms_norm_kernel = "fused_avx2_fma";
  header.adamw_kernel = "torch";
  std::string text = FingerprintLog::format_header(header);
  for (size_t i = 0; i < losses.size(); ++i) {
    text += FingerprintLog::format_step(static_cast<int64_t>(i + 1), losses[i], 1.5, 1e-3,
                                        64 * static_cast<int64_t>(i + 1), std::nullopt) +
            "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("compare: the same run twice is identical (exit 0)", "[compare][cli]") {
  auto dir = test::temp_dir("cmp_same");
  train("", dir + "/a");
  train("--metrics.log_freq 1", dir + "/b");
  auto r = compare(dir + "/a " + dir + "/b");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output,
             Catch::Contains("result: bitwise identical: every field of the 4 common steps") &&
                 Catch::Contains("metrics.log_freq: A 10 | B 1  (not in the config hash)"));
  // A fingerprint.log given by its path works as well as its folder.
  CHECK(compare(dir + "/a/fingerprint.log " + dir + "/b").exit_code == 0);
}

TEST_CASE("compare: different seeds diverge at step 1 (exit 1)", "[compare][cli]") {
  auto dir = test::temp_dir("cmp_seed");
  train("", dir + "/a");
  train("--debug.seed 12", dir + "/b");
  auto r = compare(dir + "/a " + dir + "/b");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("seed: A 11 | B 12") &&
                           Catch::Contains("debug.seed: A 11 | B 12") &&
                           Catch::Contains("result: diverged at step 1: loss") &&
                           Catch::Contains("loss difference from step 1:"));
}

TEST_CASE("compare: an lr schedule that changes from step 3 on is named at step 3",
          "[compare][cli]") {
  auto dir = test::temp_dir("cmp_lr");
  // warmup 1, 6 steps: linear decay from step 3 (A) or, with decay_ratio 0.5, from step 5 (B).
  const std::string common = "--training.steps 6 --lr_scheduler.warmup_steps 1 ";
  train(common, dir + "/a");
  train(common + "--lr_scheduler.decay_ratio 0.5", dir + "/b");
  auto r = compare(dir + "/a " + dir + "/b");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("result: diverged at step 3: lr") &&
                           Catch::Contains("lr_scheduler.decay_ratio: A unset | B 0.5"));
  // Step 3's loss still agrees (it comes before that step's update); step 4's does not.
  CHECK_THAT(r.output, Catch::Matches("(.|\n)*\n *3 +([0-9.e+-]+) +\\2 +0 +0\n(.|\n)*"));
}

TEST_CASE("compare: runs differing only in cpu_threads are told apart at step 1, down to tensors",
          "[compare][cli][numerics]") {
  auto dir = test::temp_dir("cmp_threads");
  // Large enough for matmuls and reductions to be split between threads.
  const std::string args =
      "--training.seq_len 128 --training.local_batch_size 4 "
      "--training.steps 2 --debug.numerics_trace blocks ";
  train(args + "--training.cpu_threads 1", dir + "/a");
  train(args + "--training.cpu_threads 2", dir + "/b");
  auto r = compare(dir + "/a " + dir + "/b");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("cpu_threads: A 1 | B 2") &&
                           Catch::Contains("training.cpu_threads: A 1 | B 2"));
  // Whether the thread count changes the bits depends on libtorch's kernels: it does on Debian's
  // 1.13 here, not on trixie's 2.6 at this size. compare must agree with the files either way.
  auto steps = [](const std::string& log) { return log.substr(log.find("\nstep ")); };
  if (steps(test::read_text(dir + "/a/fingerprint.log")) ==
      steps(test::read_text(dir + "/b/fingerprint.log"))) {
    WARN("this libtorch computes the same bits with 1 and 2 threads: checking 'identical'");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("result: bitwise identical"));
    return;
  }
  CHECK(r.exit_code == 1);
  // The losses agree; the gradient norm may or may not keep the difference, the parameters do.
  CHECK_THAT(r.output, (Catch::Contains("result: diverged at step 1: grad_norm") ||
                        Catch::Contains("result: diverged at step 1: params")) &&
                           Catch::Contains("numerics.log: first difference at step 1") &&
                           Catch::Contains("first gradient (backward order): grad ") &&
                           Catch::Contains("first tensor (forward order): fwd "));
  // The losses agree: only the trace shows where the bits part.
  CHECK_THAT(r.output, Catch::Matches("(.|\n)*\n +1 +([0-9.e+-]+) +\\2 +0 +0\n(.|\n)*"));
}

TEST_CASE("compare: activation checkpointing full and none are identical", "[compare][cli]") {
  auto dir = test::temp_dir("cmp_ac");
  train("--debug.numerics_trace blocks", dir + "/a");
  train("--debug.numerics_trace blocks --activation_checkpoint.mode full", dir + "/b");
  auto r = compare(dir + "/a " + dir + "/b");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("activation_checkpoint.mode: A \"none\" | B \"full\"") &&
                           Catch::Contains("result: bitwise identical") &&
                           Catch::Contains("numerics.log: no difference"));
}

TEST_CASE("compare: truncated, malformed and missing inputs exit 2 naming file and line",
          "[compare][cli]") {
  auto dir = test::temp_dir("cmp_bad");
  auto good = fingerprint_text({8.0, 7.5, 7.0});
  test::write_text(dir + "/good.log", good);
  test::write_text(dir + "/cut.log", good.substr(0, good.size() - 9));
  auto cut = compare(dir + "/good.log " + dir + "/cut.log");
  CHECK(cut.exit_code == 2);
  CHECK_THAT(cut.output, Catch::Contains(dir + "/cut.log:20: the file ends inside this line"));
  std::string bad = good;
  bad.replace(bad.find("step 2 loss 0x"), 14, "step 2 loss 0q");
  test::write_text(dir + "/bad.log", bad);
  auto malformed = compare(dir + "/bad.log " + dir + "/good.log");
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(malformed.output, Catch::Contains(dir + "/bad.log:19: loss: \"0q"));
  auto missing = compare(dir + "/good.log " + dir + "/nothing");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains(dir + "/nothing: no such file or folder"));
  CHECK(compare(dir + "/good.log").exit_code == 2);
  CHECK(compare(dir + "/good.log " + dir + "/good.log --tolerance x").exit_code == 2);
  CHECK(compare(dir + "/good.log " + dir + "/good.log").exit_code == 0);
}

TEST_CASE("compare: --tolerance passes differences within a relative bound", "[compare][cli]") {
  auto dir = test::temp_dir("cmp_tol");
  const double loss = 8.0;
  test::write_text(dir + "/a.log", fingerprint_text({loss, loss, loss}));
  test::write_text(dir + "/b.log", fingerprint_text({loss, loss * (1 + 1e-6), loss}));
  auto exact = compare(dir + "/a.log " + dir + "/b.log");
  CHECK(exact.exit_code == 1);
  CHECK_THAT(exact.output, Catch::Contains("result: diverged at step 2: loss"));
  auto loose = compare(dir + "/a.log " + dir + "/b.log --tolerance 1e-5");
  CHECK(loose.exit_code == 0);
  CHECK_THAT(loose.output, Catch::Contains("result: within tolerance 1e-05"));
  auto tight = compare(dir + "/a.log " + dir + "/b.log --tolerance=1e-7");
  CHECK(tight.exit_code == 1);
  CHECK_THAT(tight.output, Catch::Contains("diverged at step 2: loss (beyond tolerance 1e-07)"));
}

TEST_CASE("compare: --json prints one object that parses", "[compare][cli]") {
  auto dir = test::temp_dir("cmp_json");
  test::write_text(dir + "/a.log", fingerprint_text({8.0, 7.0, 6.0}));
  test::write_text(dir + "/b.log", fingerprint_text({8.0, 7.0, 6.5}));
  auto r = compare(dir + "/a.log " + dir + "/b.log --json");
  CHECK(r.exit_code == 1);
  test::write_text(dir + "/out.json", r.output);
  auto parsed = python(
      "import json,sys; d=json.load(sys.stdin); "
      "print(d[\"divergent_step\"], d[\"first_difference\"][\"field\"], d[\"exit_code\"], "
      "d[\"loss_growth\"][0][\"abs_diff\"], d[\"identical\"])",
      dir + "/out.json");
  if (parsed.find("not found") != std::string::npos) {
    WARN("python3 missing: --json checked only for its exit code");
  } else {
    CHECK(parsed == "3 loss 1 0.5 False\n");
  }
}

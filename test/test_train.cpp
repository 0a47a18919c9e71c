// Training loop: loss falls, gradient accumulation matches one big batch, outputs are written,
// a non-finite loss stops the run with exit code 1.
#include <torch/cuda.h>

#include <filesystem>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>

#include "catch_torch.h"
#include "config/loader.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace titan;

namespace {

Config tiny_config(const std::string& tag) {
  Config c;
  c.job.dump_folder = test::temp_dir(tag);
  c.model.flavor = "tiny";
  c.training.local_batch_size = 8;
  c.training.seq_len = 64;
  c.training.steps = 30;
  c.training.device = DeviceChoice::kCpu;
  c.optimizer.lr = 3e-3;
  c.lr_scheduler.warmup_steps = 3;
  c.debug.seed = 1234;
  c.metrics.log_freq = 10;
  return c;
}

}  // namespace

TEST_CASE("train: a tiny model's loss falls over 30 steps", "[train]") {
  auto run = test::start_run(tiny_config("falls"));
  auto summary = run->trainer->train();
  REQUIRE(summary.losses.size() == 30);
  double first = summary.losses.front(), last = summary.losses.back();
  INFO(run->log.str());
  CHECK(first == Approx(std::log(512.0)).margin(0.6));  // about uniform over the vocabulary at init
  CHECK(last < first - 2.0);
  CHECK_THAT(run->log.str(), Catch::Contains("step: 30") && Catch::Contains("done: 30 steps"));
}

TEST_CASE(
    "train: on synthetic data the loss gets clearly below the unigram entropy within 100 steps",
    "[train]") {
  Config c = tiny_config("unigram");
  c.training.steps = 100;
  c.lr_scheduler.warmup_steps = 10;
  // Unigram entropy of the token stream the run will see (same seed, same windows).
  DataLoader probe(
      make_token_source(training_dataset(c.training), 1234, c.training.seq_len + 1, 512), 8, 64);
  std::map<int32_t, double> counts;
  double n = 0;
  for (int i = 0; i < 400; ++i) {
    for (int32_t t : probe.next_window()) counts[t] += 1, n += 1;
  }
  double unigram = 0;
  for (auto& [token, count] : counts) unigram -= count / n * std::log(count / n);
  auto losses = test::start_run(c)->trainer->train().losses;
  double last10 = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  INFO("unigram entropy " << unigram << ", mean loss of steps 91-100 " << last10);
  CHECK(unigram > 2.5);
  CHECK(last10 < unigram - 0.3);
}

TEST_CASE("train: the same seed repeats the losses bitwise, another seed changes them", "[train]") {
  auto losses = [](int64_t seed) {
    Config c = tiny_config("seed");
    c.training.steps = 3;
    c.debug.seed = seed;
    return test::start_run(c)->trainer->train().losses;
  };
  auto a = losses(1), b = losses(1), c = losses(2);
  CHECK(a == b);  // bitwise
  CHECK(a != c);
}

TEST_CASE("train: gradient accumulation over 2 micro-batches matches one batch of 2x", "[train]") {
  auto run = [](int64_t local, int64_t global) {
    Config c = tiny_config("accum");
    c.training.steps = 3;
    c.training.local_batch_size = local;
    c.training.global_batch_size = global;
    auto in_process = test::start_run(c);
    std::vector<StepOutcome> steps;
    for (int i = 0; i < 3; ++i) steps.push_back(in_process->trainer->train_step());
    return std::make_pair(steps, in_process->log.str());
  };
  auto [one, one_log] = run(8, -1);
  auto [two, two_log] = run(4, 8);
  CHECK_THAT(one_log, Catch::Contains("local_batch_size 8 x seq_len 64 x 1 micro-batches"));
  CHECK_THAT(two_log, Catch::Contains("local_batch_size 4 x seq_len 64 x 2 micro-batches"));
  for (int i = 0; i < 3; ++i) {
    CHECK(two[i].loss == Approx(one[i].loss).epsilon(1e-5));
    CHECK(two[i].grad_norm == Approx(one[i].grad_norm).epsilon(1e-4));
  }
}

TEST_CASE(
    "train: MFU is against a start-up sgemm, or TITAN_CPU_PEAK_FLOPS when set (any other value "
    "is exit 2 naming it)",
    "[train][cli]") {
  auto dir = test::temp_dir("peak_flops");
  const std::string run = test::tiny_run(dir + "/out", 1);
  const auto measured = test::run_shell("env -u TITAN_CPU_PEAK_FLOPS " + test::binary() + " " +
                                        run + " --job.dump_folder " + dir + "/measured 2>&1");
  INFO(measured.output);
  CHECK(measured.exit_code == 0);
  CHECK_THAT(measured.output, Catch::Contains(" GFLOP/s (measured sgemm); outputs in "));
  const auto given = test::run_titan_env("TITAN_CPU_PEAK_FLOPS=2.5e11", run);
  INFO(given.output);
  CHECK(given.exit_code == 0);
  CHECK_THAT(given.output, Catch::Contains("peak 250.0 GFLOP/s (TITAN_CPU_PEAK_FLOPS)"));
  // The measurement draws nothing from the seeded generator: the same bits either way.
  CHECK(test::fingerprint_step_lines(dir + "/measured/fingerprint.log") ==
        test::fingerprint_step_lines(dir + "/out/fingerprint.log"));
  for (const std::string bad : {"fast", "-1", "0", "1e999", "2e11x"}) {
    const auto r =
        test::run_titan_env("TITAN_CPU_PEAK_FLOPS=" + bad, test::tiny_run(dir + "/bad", 1));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("TITAN_CPU_PEAK_FLOPS: \"" + bad +
                                         "\" is not a positive number of FLOP/s"));
    CHECK_FALSE(std::filesystem::exists(dir + "/bad"));
  }
}

TEST_CASE("train: the run writes config.toml that repeats it, and metrics.jsonl", "[train][cli]") {
  auto dir = test::temp_dir("outputs");
  auto r = test::run_titan(
      "--model.flavor tiny --training.seq_len 32 --training.local_batch_size 2 "
      "--training.steps 4 --metrics.log_freq 2 --training.device cpu --job.dump_folder " +
      dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("step:  1  loss:") && Catch::Contains("grad_norm:") &&
                           Catch::Contains("tps:") && Catch::Contains("mfu:") &&
                           Catch::Contains("lr:"));
  CHECK_THAT(r.output,
             Catch::Contains("seed ") && Catch::Contains("(drawn: set debug.seed to repeat)"));
  // metrics.jsonl: steps 1, 2 and 4, full precision.
  std::istringstream jsonl(test::read_text(dir + "/metrics.jsonl"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(jsonl, line);) lines.push_back(line);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("{\"step\": 1, \"loss\": "));
  CHECK_THAT(lines[2], Catch::StartsWith("{\"step\": 4, "));
  // Each line ends with the process CPU time and minor page faults per step since the previous
  // line.
  std::smatch cpu;
  REQUIRE(std::regex_search(
      lines[2], cpu,
      std::regex(
          R"("cpu_user_s": ([-+.e0-9]+), "cpu_system_s": ([-+.e0-9]+), "minor_faults": ([.e0-9]+), "layers": )")));
  // The kernel splits a process's CPU time into user and system by tick samples: two tiny steps
  // may draw no user tick, but their sum is measured.
  CHECK(std::stod(cpu[1]) >= 0);
  CHECK(std::stod(cpu[2]) >= 0);
  CHECK(std::stod(cpu[1]) + std::stod(cpu[2]) > 0);
  CHECK(std::stod(cpu[3]) >= 0);
  // config.toml carries the drawn seed: a second run from it reproduces the first's losses.
  Config saved;
  apply_toml_file(saved, dir + "/config.toml");
  REQUIRE(saved.debug.seed.has_value());
  auto again =
      test::run_titan("--config " + dir + "/config.toml --job.dump_folder " + dir + "/again");
  REQUIRE(again.exit_code == 0);
  CHECK(test::read_text(dir + "/again/fingerprint.log") ==
        test::read_text(dir + "/fingerprint.log"));
}

TEST_CASE("train: a non-finite loss stops the run with exit 1 naming the step", "[train][cli]") {
  auto dir = test::temp_dir("nan");
  auto r = test::run_titan(
      "--model.flavor tiny --training.seq_len 16 --training.local_batch_size 2 "
      "--training.steps 20 --optimizer.lr 1e30 --lr_scheduler.warmup_steps 0 "
      "--training.device cpu --debug.seed 3 --job.dump_folder " +
      dir);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  std::smatch m;
  std::regex pattern("error: loss is (nan|inf|-inf) at step ([0-9]+)");
  REQUIRE(std::regex_search(r.output, m, pattern));
  CHECK(std::stoi(m[2]) > 1);  // step 1 logged a finite loss before the blow-up
  CHECK_THAT(r.output, Catch::Contains("step:  1  loss:"));
}

TEST_CASE("train: device cuda without CUDA is a config error before any work", "[train][cli]") {
  if (torch::cuda::is_available())
    TITAN_SKIP("SKIPPED: CUDA is available here, so device = \"cuda\" is not an error");
  auto r = test::run_titan(
      "--model.flavor tiny --training.steps 1 --training.seq_len 16 --training.device cuda "
      "--job.dump_folder " +
      test::temp_dir("nocuda"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("CUDA is not available"));
}

TEST_CASE("train: a missing dataset path fails with exit 2 before the model is built",
          "[train][cli]") {
  auto r = test::run_titan(
      "--training.dataset jsonl --training.dataset_path /nonexistent/c4.jsonl "
      "--job.dump_folder " +
      test::temp_dir("nodata"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/c4.jsonl: No such file or directory"));
  CHECK_THAT(r.output, !Catch::Contains("parameters"));
}

TEST_CASE("train: a flavor too large for the device is refused with exit 2 before building it",
          "[train][cli]") {
  auto r = test::run_titan("--model.flavor 405B --training.device cpu --job.dump_folder " +
                           test::temp_dir("huge"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("405B needs at least") && Catch::Contains("pick a smaller flavor"));
}

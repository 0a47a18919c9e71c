// CPU performance settings that must hold without the user setting anything: glibc malloc keeps
// the step's large blocks (no mmap/munmap and page faults every step) unless turned off, and idle
// OpenMP and OpenBLAS workers sleep instead of spinning unless the user says otherwise.
#include <regex>
#include <string>

#include "catch_torch.h"
#include "test_util.h"

using namespace titan;

namespace {

struct FaultRun {
  std::string output;
  double faults_per_step = -1;
};

// The debug model for 4 steps; the end-of-run line's minor page faults per step.
FaultRun faults_per_step(const std::string& env, const std::string& tag) {
  auto r = test::run_titan_env(
      env, "--config " + test::source_dir() +
               "/configs/debug_model.toml --training.seq_len 256 --training.local_batch_size 2 "
               "--training.steps 4 --training.device cpu --activation_checkpoint.mode none "
               "--debug.seed 1 --job.dump_folder " +
               test::temp_dir(tag));
  FaultRun run{r.output};
  std::smatch m;
  if (r.exit_code == 0 &&
      std::regex_search(r.output, m, std::regex("([0-9]+) minor page faults per step"))) {
    run.faults_per_step = std::stod(m[1]);
  }
  return run;
}

}  // namespace

TEST_CASE("malloc tuning: on by default it cuts the page faults of each step; env turns it off",
          "[perf]") {
  FaultRun tuned = faults_per_step("", "malloc_tuned");
  FaultRun plain = faults_per_step("TITAN_MALLOC_TUNING=0", "malloc_plain");
  INFO(tuned.output << "\n" << plain.output);
  CHECK_THAT(tuned.output,
             Catch::Contains("glibc malloc tuned for training: mmap threshold 32 MiB"));
  CHECK_THAT(plain.output, Catch::Contains("glibc malloc defaults (TITAN_MALLOC_TUNING=0)"));
  REQUIRE(tuned.faults_per_step >= 0);
  REQUIRE(plain.faults_per_step > 0);
  CHECK(tuned.faults_per_step < 0.7 * plain.faults_per_step);  // measured: 18,773 vs 36,029
  FaultRun glibc = faults_per_step("MALLOC_TOP_PAD_=0", "malloc_glibc_env");
  CHECK_THAT(glibc.output, Catch::Contains("glibc malloc as set by MALLOC_TOP_PAD_"));
}

TEST_CASE(
    "idle threads: titan-train sets OMP_WAIT_POLICY and OPENBLAS_THREAD_TIMEOUT, the user's "
    "values win",
    "[perf]") {
  const std::string args = test::tiny_run(test::temp_dir("idle_threads"), 1);
  // The test binary itself runs with the variables set: unset them as a fresh shell would.
  const std::string fresh =
      "env -u OMP_WAIT_POLICY -u OPENBLAS_THREAD_TIMEOUT -u TITAN_SET_THREAD_ENV";
  auto defaults = test::run_titan_env(fresh, args);
  INFO(defaults.output);
  REQUIRE(defaults.exit_code == 0);
  CHECK_THAT(defaults.output,
             Catch::Contains("idle threads sleep: OMP_WAIT_POLICY=PASSIVE (set by titan-train); "
                             "OPENBLAS_THREAD_TIMEOUT=4 (set by titan-train)"));
  auto user = test::run_titan_env(fresh + " OPENBLAS_THREAD_TIMEOUT=20",
                                  test::tiny_run(test::temp_dir("idle_threads_user"), 1));
  INFO(user.output);
  REQUIRE(user.exit_code == 0);
  CHECK_THAT(user.output, Catch::Contains("OMP_WAIT_POLICY=PASSIVE (set by titan-train); "
                                          "OPENBLAS_THREAD_TIMEOUT=20 (set either"));
}

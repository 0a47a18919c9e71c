// The determinism controller: its record agrees with libtorch's global state, threads are set
// for ATen and OpenBLAS, CUBLAS_WORKSPACE_CONFIG is validated, and an op without a deterministic
// implementation fails with exit code 3 (or warns once per op with warn_only).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <sstream>

#include "app/compare.h"
#include "catch_torch.h"
#include "determinism/determinism.h"
#include "test_util.h"
#include "util/blas_threads.h"
#include "util/error.h"

using namespace titan;

namespace {

// Restores CUBLAS_WORKSPACE_CONFIG and libtorch's determinism flags after a test.
struct GlobalStateGuard {
  const char* saved = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  std::string value = saved ? saved : "";
  ~GlobalStateGuard() {
    if (saved)
      setenv("CUBLAS_WORKSPACE_CONFIG", value.c_str(), 1);
    else
      unsetenv("CUBLAS_WORKSPACE_CONFIG");
    at::globalContext().setDeterministicAlgorithms(false, false);
    at::globalContext().setDeterministicCuDNN(false);
  }
};

Config seeded(int64_t seed = 5) {
  Config c;
  c.debug.seed = seed;
  return c;
}

// put_ without accumulate has no deterministic CPU kernel in libtorch.
void run_nondeterministic_op() {
  auto t = at::zeros({4});
  t.put_(at::tensor({0}, at::kLong), at::ones({1}), /*accumulate=*/false);
}

void enable_strict_determinism(std::ostream& log) {
  Config c = seeded();
  c.debug.deterministic = true;
  make_deterministic(c, 0, 1, log);
}

}  // namespace

TEST_CASE("determinism: the record agrees with libtorch's global state", "[determinism]") {
  GlobalStateGuard guard;
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  std::ostringstream log;
  Config c = seeded();
  c.debug.deterministic = true;
  c.debug.deterministic_warn_only = true;
  auto r = make_deterministic(c, 0, 1, log);
  auto& ctx = at::globalContext();
  CHECK(r.deterministic == ctx.deterministicAlgorithms());
  CHECK(r.deterministic);
  CHECK(r.deterministic_warn_only == ctx.deterministicAlgorithmsWarnOnly());
  CHECK(r.deterministic_warn_only);
  CHECK(r.cudnn_deterministic == ctx.deterministicCuDNN());
  CHECK(r.cudnn_deterministic);
  CHECK(r.cudnn_benchmark == ctx.benchmarkCuDNN());
  CHECK_FALSE(r.cudnn_benchmark);
  REQUIRE(std::getenv("CUBLAS_WORKSPACE_CONFIG") != nullptr);
  CHECK(std::string(std::getenv("CUBLAS_WORKSPACE_CONFIG")) == ":4096:8");
  CHECK(r.cublas_workspace_config == ":4096:8");
  CHECK(r.cublas_workspace_origin == "set by titan-train");

  c.debug.deterministic = false;
  c.debug.deterministic_warn_only = false;
  r = make_deterministic(c, 0, 1, log);
  CHECK_FALSE(ctx.deterministicAlgorithms());
  CHECK_FALSE(r.deterministic);
}

TEST_CASE("determinism: a valid user CUBLAS_WORKSPACE_CONFIG is kept, an invalid one refused",
          "[determinism]") {
  GlobalStateGuard guard;
  std::ostringstream log;
  Config c = seeded();
  c.debug.deterministic = true;
  setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  auto r = make_deterministic(c, 0, 1, log);
  CHECK(r.cublas_workspace_config == ":16:8");
  CHECK(r.cublas_workspace_origin == "kept from the environment");
  setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", 1);
  CHECK_THROWS_AS(make_deterministic(c, 0, 1, log), ConfigError);
  CHECK_THROWS_WITH(make_deterministic(c, 0, 1, log),
                    Catch::Contains("\":0:0\"") && Catch::Contains("\":4096:8\", \":16:8\""));
}

TEST_CASE("determinism: invalid CUBLAS_WORKSPACE_CONFIG stops the binary with exit 2",
          "[determinism][cli]") {
  auto r = test::run_titan_env(
      "CUBLAS_WORKSPACE_CONFIG=bogus",
      "--model.flavor tiny --debug.deterministic --job.dump_folder " + test::temp_dir("cublas"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("CUBLAS_WORKSPACE_CONFIG") && Catch::Contains("\"bogus\""));
  CHECK_THAT(r.output, !Catch::Contains("step:"));
}

TEST_CASE("determinism: ATen and OpenBLAS get the same explicit thread count", "[determinism]") {
  std::ostringstream log;
  Config c = seeded();
  c.training.cpu_threads = 1;
  auto r = make_deterministic(c, 0, 1, log);
  CHECK(r.cpu_threads == 1);
  CHECK(at::get_num_threads() == 1);
  if (r.blas_threads_set) CHECK(blas_threads() == 1);  // OpenBLAS is the BLAS in use
  c.training.cpu_threads = 0;                          // 0 = every core this process may use
  r = make_deterministic(c, 0, 1, log);
  CHECK(r.cpu_threads == available_cores());
  CHECK(at::get_num_threads() == available_cores());
  if (r.blas_threads_set) CHECK(blas_threads() == available_cores());
}

// (Several processes agree on rank 0's drawn seed: test_data_parallel.cpp.)
TEST_CASE("determinism: a set seed is applied, an unset one is drawn", "[determinism]") {
  std::ostringstream log;
  Config c = seeded(77);
  auto r = make_deterministic(c, 0, 1, log);
  CHECK(r.seed == 77);
  CHECK_FALSE(r.seed_was_drawn);
  auto a = at::randn({4});
  make_deterministic(c, 0, 1, log);
  CHECK(at::equal(a, at::randn({4})));
  c.debug.seed.reset();
  auto drawn = make_deterministic(c, 0, 1, log);
  CHECK(drawn.seed_was_drawn);
  CHECK(drawn.seed < (1ull << 62));
}

TEST_CASE("determinism: the start block lists every setting, tagged", "[determinism]") {
  GlobalStateGuard guard;
  std::ostringstream log;
  Config c = seeded(9);
  c.debug.deterministic = true;
  auto block = format_determinism_block(make_deterministic(c, 0, 1, log), "cpu");
  for (const char* key : {"seed", "deterministic_algorithms", "deterministic_warn_only",
                          "cudnn.deterministic", "cudnn.benchmark", "CUBLAS_WORKSPACE_CONFIG",
                          "fill_uninitialized_memory", "cpu_threads", "device", "world_size"}) {
    CHECK_THAT(block, Catch::Contains(std::string("[determinism] ") + key));
  }
  CHECK_THAT(block, Catch::Contains("expect some slowdown"));
}

// The kernel set is chosen when OpenBLAS loads, so only a new process can show another one.
TEST_CASE(
    "determinism: the start block names the OpenBLAS kernels and OPENBLAS_CORETYPE, and other "
    "kernels give other bits",
    "[determinism][cli]") {
#if !defined(__x86_64__)
  TITAN_SKIP("SKIPPED: the kernel names below are x86-64 OpenBLAS's");
#endif
  if (openblas_kernels().core.empty())
    TITAN_SKIP("SKIPPED: the BLAS libtorch loaded is not OpenBLAS");
  const std::string dir = test::temp_dir("blas_kernels");
  auto run = [&](const std::string& env, const std::string& name) {
    auto r =
        test::run_titan_env("env -u OPENBLAS_CORETYPE " + env, test::tiny_run(dir + "/" + name, 2));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return r.output;
  };
  CHECK_THAT(run("", "detected"), Catch::Contains("(detected for this CPU)"));
  CHECK_THAT(run("OPENBLAS_CORETYPE=Prescott", "prescott"),
             Catch::Contains("[determinism] blas_kernels                 OpenBLAS Prescott "
                             "(OPENBLAS_CORETYPE=Prescott in the environment)"));
  run("OPENBLAS_CORETYPE=Haswell", "haswell");
  run("OPENBLAS_CORETYPE=Haswell", "haswell_again");
  // Haswell's kernels use FMA, Prescott's do not: the losses part at step 1. The header names
  // the kernels, so that a diff of the two logs says why.
  const auto fingerprint = [&](const std::string& name) {
    return test::read_text(dir + "/" + name + "/fingerprint.log");
  };
  const auto steps = [&](const std::string& name) {
    const std::string text = fingerprint(name);
    return text.substr(text.find("\nstep 1 "));
  };
  CHECK(fingerprint("haswell") == fingerprint("haswell_again"));
  CHECK(steps("haswell") != steps("prescott"));
  CHECK_THAT(fingerprint("prescott"), Catch::Contains("\nblas_kernels OpenBLAS Prescott\n"));
  CHECK_THAT(fingerprint("haswell"), Catch::Contains("\nblas_kernels OpenBLAS Haswell\n"));
  std::ostringstream report;
  CHECK(run_compare({dir + "/haswell", dir + "/prescott"}, report, report) == 1);
  CHECK_THAT(report.str(),
             Catch::Contains("blas_kernels: A OpenBLAS Haswell | B OpenBLAS Prescott"));
}

TEST_CASE("determinism: the op name is read from libtorch's message", "[determinism]") {
  CHECK(nondeterministic_op("put_ does not have a deterministic implementation, but you set ...") ==
        "put_");
  CHECK_FALSE(nondeterministic_op("some other error").has_value());
}

TEST_CASE("determinism: warn_only logs each nondeterministic op once and continues",
          "[determinism]") {
  GlobalStateGuard guard;
  std::ostringstream log;
  Config c = seeded();
  c.debug.deterministic = true;
  c.debug.deterministic_warn_only = true;
  make_deterministic(c, 0, 1, log);
  auto t = at::zeros({4});
  auto index = at::tensor({0, 1}, at::kLong);
  for (int i = 0; i < 3; ++i)
    t.put_(index, at::ones({2}), /*accumulate=*/false);  // no deterministic kernel
  CHECK(at::equal(t, at::tensor({1.0f, 1.0f, 0.0f, 0.0f})));
  std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("put_ has no deterministic implementation") &&
                       Catch::Contains("deterministic_warn_only"));
  CHECK(text.find("put_") == text.rfind("put_"));  // once, not three times
}

TEST_CASE("determinism: without warn_only the same op raises libtorch's error", "[determinism]") {
  GlobalStateGuard guard;
  std::ostringstream log;
  enable_strict_determinism(log);
  try {
    run_nondeterministic_op();
    FAIL("no error");
  } catch (const c10::Error& e) {
    CHECK(nondeterministic_op(e.what_without_backtrace()) == "put_");
  }
}

TEST_CASE("determinism: a nondeterministic op under deterministic = true exits with code 3",
          "[determinism]") {
  GlobalStateGuard guard;
  std::ostringstream log;
  enable_strict_determinism(log);
  try {
    fail_on_nondeterministic_op(7, run_nondeterministic_op);
    FAIL("no error");
  } catch (...) {
    std::ostringstream err;
    CHECK(report_current_exception(err) == kExitCheckFailed);
    CHECK_THAT(err.str(),
               Catch::Contains("check failed: step 7: put_ has no deterministic implementation") &&
                   Catch::Contains("hint: set debug.deterministic_warn_only = true"));
  }
  // Other errors keep their own exit code.
  try {
    fail_on_nondeterministic_op(1, [] { throw RuntimeFailure("disk full"); });
    FAIL("no error");
  } catch (...) {
    std::ostringstream err;
    CHECK(report_current_exception(err) == kExitRuntimeError);
  }
}

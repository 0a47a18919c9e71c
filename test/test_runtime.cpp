// Runtime settings: threads for ATen and OpenBLAS, seeding, deterministic flag.
#include "catch_torch.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ATen.h>

#include "determinism/runtime.h"
#include "util/blas_threads.h"

using namespace titan;

TEST_CASE("runtime: ATen and OpenBLAS get the same explicit thread count", "[runtime]") {
  Config c;
  c.training.cpu_threads = 1;
  c.debug.seed = 5;
  auto s = apply_runtime_settings(c);
  CHECK(s.cpu_threads == 1);
  CHECK(at::get_num_threads() == 1);
  if (s.blas_threads_set) CHECK(blas_threads() == 1);  // OpenBLAS is the BLAS in use
  c.training.cpu_threads = 0;                          // 0 = every core this process may use
  s = apply_runtime_settings(c);
  CHECK(s.cpu_threads == available_cores());
  CHECK(at::get_num_threads() == available_cores());
  if (s.blas_threads_set) CHECK(blas_threads() == available_cores());
}

TEST_CASE("runtime: a set seed is applied, an unset one is drawn and reported", "[runtime]") {
  Config c;
  c.debug.seed = 77;
  auto s = apply_runtime_settings(c);
  CHECK(s.seed == 77);
  CHECK_FALSE(s.seed_was_drawn);
  auto a = at::randn({4});
  apply_runtime_settings(c);
  CHECK(at::equal(a, at::randn({4})));
  c.debug.seed.reset();
  auto drawn = apply_runtime_settings(c);
  CHECK(drawn.seed_was_drawn);
  CHECK(drawn.seed < (1ull << 62));
}

TEST_CASE("runtime: debug.deterministic sets at::Context's deterministic algorithms", "[runtime]") {
  Config c;
  c.debug.seed = 1;
  c.debug.deterministic = true;
  c.debug.deterministic_warn_only = true;
  apply_runtime_settings(c);
  CHECK(at::globalContext().deterministicAlgorithms());
  CHECK(at::globalContext().deterministicAlgorithmsWarnOnly());
  c.debug.deterministic = false;
  c.debug.deterministic_warn_only = false;
  apply_runtime_settings(c);
  CHECK_FALSE(at::globalContext().deterministicAlgorithms());
}

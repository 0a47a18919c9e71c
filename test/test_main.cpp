// Catch2 main. Like titan-train, the test binary runs with a passive OpenMP wait policy: spinning
// OpenMP workers would fight OpenBLAS's threads for the cores and slow every test down.
#define CATCH_CONFIG_RUNNER
#include "catch_torch.h"
#include "util/omp_env.h"

int main(int argc, char** argv) {
  titan::ensure_idle_threads_sleep(argv);
  return Catch::Session().run(argc, argv);
}

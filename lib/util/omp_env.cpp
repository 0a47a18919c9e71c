#include "util/omp_env.h"

#include <unistd.h>

#include <cstdlib>

namespace titan {

void ensure_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);
  // execv returned: keep running with the default policy (the variable is set for children).
}

}  // namespace titan

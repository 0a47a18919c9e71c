#!/usr/bin/env bash
# The libtorch 2.6 CI leg, on Debian trixie's CUDA build of libtorch: compiles every CUDA path of
# titan-train (TITAN_WITH_CUDA, the NCCL process group) on a machine without a GPU, then runs the
# CPU test suite against that libtorch, less the tests of what libtorch does not decide; the
# tests tagged [cuda] report skipped, saying why.
# The trixie root (scripts/trixie_root.sh --cuda, with its build-only cuDNN stand-in) and the
# compiler cache inside it live in /var/cache/titan-train/trixie-cuda, outside the checkout, so
# later runs on this machine reuse both. Needs root. The build goes to build-cuda/ (the checkout
# is /src inside the root). Extra arguments go to ctest. Prints how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests this leg leaves to the main leg, by Catch tag: the subjects that libtorch 2.x and
# CUDA do not change, because libtorch does not compile them (tokenizers without training, config
# parsing, the JSON fuzzers, compare's log reading) or because titan-train's own code decides
# them alone (bad input, the command line, output files, torchtitan's keys, TensorBoard's files,
# hostile input outside distributed runs). A test of such a group whose subject libtorch 2.x does
# differently (an allocator's failure, start-up, a store's sockets) is tagged [libtorch2] and
# runs here all the same.
left_to_main_leg=""
for group in "[tokenizer]~[data]" "[config]" "[fuzz]" "[compare]" "[bad_input]" "[cli]" \
  "[outputs]" "[torchtitan]" "[tensorboard]" "[hostile]~[distributed]"; do
  left_to_main_leg+="${left_to_main_leg:+,}$group~[libtorch2]"
done
t0=$SECONDS
bash scripts/trixie_root.sh --cuda up
t1=$SECONDS
bash scripts/trixie_root.sh --cuda run bash -c '
  set -euo pipefail
  generator=()
  if [ ! -f build-cuda/CMakeCache.txt ]; then generator=(-G Ninja); fi
  # Warnings stay warnings here, as on the CPU 2.6 leg: gcc 14 reports -Warray-bounds false
  # positives inside libstdc++ inlined from libtorch headers. The main leg builds with -Werror.
  # Torch'"'"'s CMake files warn about what this build does not use (kineto, nvrtc'"'"'s hash).
  # One ctest test per test case: the tests left to the main leg are excluded by name (below).
  cmake -S . -B build-cuda "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTITAN_WERROR=OFF \
    -DTITAN_TEST_PER_FILE=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -Wno-dev >/tmp/titan-configure.log 2>&1 || {
    cat /tmp/titan-configure.log >&2
    exit 1
  }
  grep -q "^TITAN_WITH_CUDA_BUILD:INTERNAL=1" build-cuda/CMakeCache.txt || {
    echo "test_libtorch_cuda: CMake did not enable CUDA with this libtorch" >&2
    exit 1
  }'
t2=$SECONDS
bash scripts/trixie_root.sh --cuda run bash -c '
  set -euo pipefail
  status=0
  cmake --build build-cuda -j "$(nproc)" >build-cuda/build.log 2>&1 || status=$?
  # Everything but the progress lines: the warnings (and errors) of the build.
  grep -v "^\[[0-9]*/[0-9]*\]" build-cuda/build.log | head -300 || true
  [ "$status" -eq 0 ] || { echo "test_libtorch_cuda: the build failed" >&2; exit 1; }
  echo "test_libtorch_cuda: $(grep -c "warning:" build-cuda/build.log || true) compiler warnings"
  echo "test_libtorch_cuda: $(build-cuda/titan-train --version | paste -sd" ")"
  build-cuda/titan-train --version | grep -q "cuda compiled in: yes"
  ccache --show-stats 2>/dev/null | grep -i "hit" | head -2 || true'
t3=$SECONDS
echo "test_libtorch_cuda: this machine has no GPU, so the tests tagged [cuda] report skipped" \
  "(scripts/gpu_check.sh runs them on a GPU machine)"
# The tests left to the main leg (above) ran there already: their list is left out here.
status=0
bash scripts/trixie_root.sh --cuda run bash -c '
  set -euo pipefail
  tags=$1
  shift
  cd build-cuda
  # Catch2 v3 (trixie) lists the names alone, one a line; if it cannot, the whole suite runs.
  ./titan_tests "$tags" --list-tests --verbosity quiet >main_leg_tests.txt ||
    : >main_leg_tests.txt
  echo tokenizer_oracle_data >>main_leg_tests.txt # the oracle tests'"'"' fixture
  echo "test_libtorch_cuda: $(wc -l <main_leg_tests.txt) tests left to the main leg ($tags)"
  exclude=(--exclude-from-file main_leg_tests.txt)
  ctest --help >ctest_help.txt
  grep -q -- --exclude-from-file ctest_help.txt || exclude=() # CMake >= 3.29 (trixie: 3.31)
  ctest --output-on-failure -j "$(nproc)" "${exclude[@]}" "$@"' \
  ctest "$left_to_main_leg" "$@" || status=$?
t4=$SECONDS
echo "test_libtorch_cuda: root $((t1 - t0)) s, configure $((t2 - t1)) s, build $((t3 - t2)) s," \
  "tests $((t4 - t3)) s, total $((t4 - t0)) s"
exit "$status"

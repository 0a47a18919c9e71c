#!/usr/bin/env bash
# The second CI leg: builds titan-train and runs the whole test suite (the parity tests against
# the same test/data/llama_reference.bin included) on Debian trixie's libtorch 2.6 (CPU) and
# Catch2 v3, in the trixie root of scripts/trixie_root.sh (created on first use in .trixie/,
# reused after). Needs root. The build goes to build-trixie/ (the checkout is /src inside the
# root), apart from the host's build/. Extra arguments go to ctest. Prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/trixie_root.sh up
t1=$SECONDS
bash scripts/trixie_root.sh run bash -c '
  set -euo pipefail
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  generator=()
  if [ ! -f build-trixie/CMakeCache.txt ]; then generator=(-G Ninja); fi
  # Warnings stay warnings here: gcc 14 reports -Warray-bounds false positives inside libstdc++
  # (stl_algobase.h memmove, inlined into our code). The main leg builds with -Werror.
  cmake -S . -B build-trixie "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTITAN_WERROR=OFF \
    "${launcher[@]}" >/dev/null
  cmake --build build-trixie -j "$(nproc)"
  echo "test_libtorch2: $(build-trixie/titan-train --version | head -2 | paste -sd" ")"'
t2=$SECONDS
status=0
bash scripts/trixie_root.sh run bash -c 'cd build-trixie && ctest --output-on-failure -j "$(nproc)" "$@"' \
  ctest "$@" || status=$?
t3=$SECONDS
echo "test_libtorch2: root $((t1 - t0)) s, build $((t2 - t1)) s, tests $((t3 - t2)) s, total $((t3 - t0)) s"
exit "$status"

#!/usr/bin/env bash
# Configures and builds titan-train into build/ (Release): everything (the binary, the tests and
# the benchmarks), or with `--target NAME` first only that target and what it links (the main
# job builds only `titan-train`). Other arguments go to cmake's configure step, e.g.
# -DCMAKE_PREFIX_PATH=... for a CUDA libtorch.
set -euo pipefail
cd "$(dirname "$0")/.."
target=()
if [ "${1:-}" = "--target" ]; then
  target=(--target "$2")
  shift 2
fi
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f build/CMakeCache.txt ]; then generator=(-G Ninja); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${generator[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)" "${target[@]}"

#!/usr/bin/env bash
# Configures and builds titan-train into build/ (Release). Extra arguments go to cmake's
# configure step, e.g. -DCMAKE_PREFIX_PATH=... for a CUDA libtorch.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if command -v ninja >/dev/null 2>&1 && [ ! -f build/CMakeCache.txt ]; then generator=(-G Ninja); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${generator[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)"

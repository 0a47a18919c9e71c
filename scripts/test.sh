#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --tests
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"

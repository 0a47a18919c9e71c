#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --tests
scripts/build.sh
cd build
# One job more than cores: at -j$(nproc) the cores were busy 85% of the time (the tests wait on
# sockets, fsync and the ranks' timeouts), and the suite passes under twice that load.
ctest --output-on-failure -j "$(($(nproc) + 1))" "$@"

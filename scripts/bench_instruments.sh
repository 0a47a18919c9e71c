#!/usr/bin/env bash
# The cost of validation and profiling per step on the CPU debug model, in ROUNDS (default 3)
# interleaved rounds (scripts/bench/instruments.py).
# Usage: scripts/bench_instruments.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/instruments.py --rounds "${ROUNDS:-3}" -- "$@"

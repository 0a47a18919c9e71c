#!/usr/bin/env bash
# Cost of arming the rerun check on the CPU debug model (seq_len 512, local_batch_size 4, 2
# warm-up + 10 measured steps, AC off): debug.rerun_on = "nan" keeps the state before every step
# in memory (the worst case; no step is rerun). Rounds interleave off/armed, ROUNDS times each
# (default 3), so machine noise hits both alike. Prints each side's median step time with its
# min-max spread, the overhead of the medians (target < 10%), the run's own figure for keeping
# the state (memory, ms per step), and whether fingerprint.log is identical (arming must change
# nothing computed).
# Usage: scripts/bench_rerun.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/variants.py --rounds "${ROUNDS:-3}" --target 10 \
  --grep "rerun check: state kept" \
  --variant "off=--debug.rerun_on none" \
  --variant "armed=--debug.rerun_on nan" -- "$@"

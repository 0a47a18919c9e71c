#!/usr/bin/env bash
# Step-time cost of [debug] numerics_trace = "blocks" and "ops" against "none" on the CPU debug
# model (seq_len 512, local_batch_size 4, 2 warm-up + 10 measured steps, trace every step, AC
# off). Rounds interleave none/blocks/ops, ROUNDS times each (default 3), so machine noise hits
# all three alike; prints each level's median step time with the min-max spread over rounds, the
# overheads of the medians, the size of numerics.log, and whether the fingerprint.log of the
# three levels is identical (the trace must not change what is computed).
# Usage: scripts/bench_numerics.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/variants.py --rounds "${ROUNDS:-3}" --file numerics.log \
  --target 5 --target 25 \
  --variant "none=--debug.numerics_trace none" \
  --variant "blocks=--debug.numerics_trace blocks" \
  --variant "ops=--debug.numerics_trace ops" -- "$@"

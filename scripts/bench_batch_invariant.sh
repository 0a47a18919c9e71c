#!/usr/bin/env bash
# debug.batch_invariant against the normal step on the CPU debug model (seq_len 512, 4 sequences
# a step), on 1 rank and on 2 ranks (Gloo on loopback), in ROUNDS (default 3) interleaved rounds:
# median step time and peak RSS with their spreads (scripts/bench/batch_invariant.py).
# Usage: scripts/bench_batch_invariant.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/batch_invariant.py --rounds "${ROUNDS:-3}" -- "$@"

#!/usr/bin/env bash
# Data parallelism on this machine: 1 process against 2 (Gloo on loopback), CPU debug model,
# seq_len 512, local_batch_size 4 per rank, in ROUNDS (default 3) interleaved rounds. Prints
# tokens/s over all ranks (medians and spreads), the ratio, and the gradient all-reduce's time
# per step and share of the step (scripts/bench/data_parallel.py).
# Usage: scripts/bench_dp.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/data_parallel.py --rounds "${ROUNDS:-3}" -- "$@"

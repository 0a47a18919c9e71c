#!/usr/bin/env bash
# FSDP against replication on this machine (Gloo on loopback): debugmodel_wide at 1, 2 and 4
# ranks, in ROUNDS (default 3) interleaved rounds. Prints each variant's peak RSS per rank
# against the model state the memory check counts, tokens/s over all ranks, and FSDP's
# all-gather waits and reduce-scatter time per step, prefetched and not
# (scripts/bench/fsdp.py).
# Usage: scripts/bench_fsdp.sh [extra titan-train flags]
#        MIXED_PRECISION=1 scripts/bench_fsdp.sh   (bfloat16 all-gather and reduce-scatter, 2 ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
mixed=()
if [ "${MIXED_PRECISION:-0}" = 1 ]; then mixed=(--mixed-precision); fi
exec python3 scripts/bench/fsdp.py --rounds "${ROUNDS:-3}" "${mixed[@]}" -- "$@"

#!/usr/bin/env bash
# FSDP against replication on this machine (Gloo on loopback): debugmodel_wide at 1, 2 and 4
# ranks, in ROUNDS (default 3) interleaved rounds. Prints each variant's peak RSS per rank
# against the model state the memory check counts, tokens/s over all ranks, and FSDP's
# all-gather waits and reduce-scatter time per step, prefetched and not
# (scripts/bench/fsdp.py).
# Usage: scripts/bench_fsdp.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/fsdp.py --rounds "${ROUNDS:-3}" -- "$@"

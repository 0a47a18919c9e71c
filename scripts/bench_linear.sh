#!/usr/bin/env bash
# The linear layers on ATen's matmul (OpenBLAS) against oneDNN's sgemm (debug.cpu_linear): the
# debug model's step at seq_len 512 x 4, AC off, the two alternating for ROUNDS rounds (default
# 5): median tokens/s and MFU with their min-max spread, and the ratio. WIDE=1 adds
# debugmodel_wide at 512 x 1. Each run's MFU is against the sgemm peak measured on its own backend.
# Usage: [ROUNDS=5] [WIDE=1] scripts/bench_linear.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
wide=()
if [ "${WIDE:-0}" = 1 ]; then wide+=(--wide); fi
exec python3 scripts/bench/linear_backends.py --rounds "${ROUNDS:-5}" "${wide[@]}"

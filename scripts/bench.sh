#!/usr/bin/env bash
# Throughput benchmark: titan-train against the fastest PyTorch-eager loop of the same model and
# step (scripts/bench/eager_baseline.py, Debian's python3-torch, same libtorch), on the debug
# model at seq_len 512, local_batch_size 4 on CPU, AC off, 2 warm-up + 10 measured steps.
# The eager loop's fastest environment, threads, attention formulation and AdamW implementation
# are searched once (every candidate printed); then the two alternate for ROUNDS rounds
# (default 3) and each side's median tokens/s is printed with its min-max spread, with the
# ratio of medians, titan-train's median MFU and its kernel share of CPU time
# (scripts/bench/interleaved.py). GROWTH=1 adds seq_len 256, 1024 and 2048; WIDE=1 adds the
# debugmodel_wide flavor (dim 1024, 8 layers) at seq_len 512 x 1; QWEN3=1 adds Qwen3's debugmodel
# (torchtitan's flavor, against the same eager loop written as Qwen3); SKIP_SEARCH=1 takes the eager
# setting the search found here (README) instead of searching.
# Usage: [ROUNDS=3] [GROWTH=1] [WIDE=1] [QWEN3=1] [SKIP_SEARCH=1] scripts/bench.sh [extra flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "bench: installing python3-torch for the baseline"
  apt-get install -y -qq python3-torch >/dev/null
fi
growth=()
if [ "${GROWTH:-0}" = 1 ]; then growth+=(--growth); fi
if [ "${WIDE:-0}" = 1 ]; then growth+=(--wide); fi
if [ "${QWEN3:-0}" = 1 ]; then growth+=(--qwen3); fi
if [ "${SKIP_SEARCH:-0}" = 1 ]; then growth+=(--skip-search); fi
exec "$PY" scripts/bench/interleaved.py --rounds "${ROUNDS:-3}" "${growth[@]}" -- "$@"

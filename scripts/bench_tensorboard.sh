#!/usr/bin/env bash
# Cost of metrics.jsonl's per-layer norms and of TensorBoard on the CPU debug model (seq_len 512,
# local_batch_size 4, AC off, 2 warm-up + 10 measured steps, logged every 2nd step as
# scripts/bench/variants.py runs it). Rounds interleave three variants, ROUNDS times each (default
# 3): TensorBoard off (the per-layer norms still measured at each logged step), on, and on with
# histograms at every logged step. Prints the median step time of each with its spread, the runs'
# own timings of the norms and the event records (per measured step and per record), the event
# file's size for the 12 steps, and whether fingerprint.log is identical (the run's numerics must
# not change).
# Usage: scripts/bench_tensorboard.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 scripts/bench/variants.py --rounds "${ROUNDS:-3}" \
  --grep "per-layer norms:" --grep "TensorBoard:" --file "tb/*/events.out.tfevents.*" \
  --variant "jsonl=--metrics.enable_tensorboard false" \
  --variant "tensorboard=--metrics.enable_tensorboard true" \
  --variant "histograms=--metrics.enable_tensorboard true --metrics.histogram_freq 2" -- "$@"

#!/usr/bin/env bash
# Regenerates test/data/capture_tiny_step1/: step 1 of the tiny model captured by the libtorch 1.13
# build (build/titan-train), OpenBLAS's Haswell kernels. test_capture.cpp replays it on every CI
# leg: the 1.13 leg's replay is the same build, the CUDA leg's libtorch 2.6 is another.
set -euo pipefail
cd "$(dirname "$0")/.."
out=test/data/capture_tiny_step1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OPENBLAS_CORETYPE=Haswell build/titan-train --model.flavor tiny --training.seq_len 16 \
  --training.local_batch_size 2 --training.device cpu --training.cpu_threads 2 --debug.seed 5 \
  --training.steps 1 --job.dump_folder "$work" --debug.capture_steps 1 >/dev/null
rm -rf "$out"
cp -r "$work/capture/step1" "$out"
echo "wrote $out ($(du -sh "$out" | cut -f1))"

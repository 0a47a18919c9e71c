#!/usr/bin/env bash
# Loading a Hugging Face Llama checkpoint (checkpoint/hf_checkpoint.h): writes a random one of a
# flavor (default 1B, bfloat16, tied as Llama 3.2 1B's release, in 1 GB shards with an index),
# then under /usr/bin/time -v
#   load  load_hf_checkpoint into float32 titan-train parameters: time and peak RSS
#   loss  the same, the model built from them, and the loss of one forward on SEQ tokens
# A benchmark, not a test: prints figures, checks nothing.
#
#   scripts/bench_hf_load.sh [FLAVOR]
#   DTYPE=float32 SHARD_BYTES=2000000000 SEQ=128 BENCH_DIR=/tmp/x scripts/bench_hf_load.sh 1B
#
# Builds build/titan-bench-hf (scripts/build.sh first). Needs about 3x the float32 model in
# memory for `loss` (the loaded tensors, the model, one shard), and the checkpoint's size on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-1B}
dtype=${DTYPE:-bfloat16}
shard_bytes=${SHARD_BYTES:-1000000000}
seq=${SEQ:-64}
dir=${BENCH_DIR:-/tmp/titan_bench_hf}
cmake --build build --target titan-bench-hf >/dev/null
rm -rf "$dir" && mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
bench=build/titan-bench-hf

echo "$flavor, $dtype, shards of at most $shard_bytes bytes, $(nproc) cores"
$bench write "$flavor" "$dir/hf" "$dtype" "$shard_bytes"
ls -l "$dir/hf" | awk 'NR > 1 {printf "  %12d  %s\n", $5, $9}'
for mode in load loss; do
  /usr/bin/time -v $bench $mode "$flavor" "$dir/hf" "$seq" 2>"$dir/time.txt"
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
  echo "  $mode: peak RSS $((rss_kb / 1024)) MiB, wall $wall"
done

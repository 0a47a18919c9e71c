#!/usr/bin/env bash
# Checkpoint save and load time against the disk's sequential write speed, in interleaved rounds
# (save; dd copying the saved file with fsync; load), medians with their min-max spread.
#
#   scripts/bench_checkpoint.sh [FLAVOR]     (default 1B: a model-only save of ~5.6 GB float32)
#   ROUNDS=3 BENCH_DIR=/tmp/titan_bench scripts/bench_checkpoint.sh debugmodel
#
# Target (issue: checkpoints): a save within 1.5x of dd's time for the same bytes. Builds
# build/titan-bench-checkpoint (scripts/build.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-1B}
rounds=${ROUNDS:-3}
dir=${BENCH_DIR:-/tmp/titan_bench_checkpoint}
cmake --build build --target titan-bench-checkpoint >/dev/null
mkdir -p "$dir"
out=$(build/titan-bench-checkpoint "$flavor" "$dir/checkpoint" "$rounds")
python3 - "$flavor" "$out" <<'PY'
import statistics, sys
flavor, text = sys.argv[1], sys.argv[2]
rows = {"save": [], "dd": [], "read": [], "load": []}
size = 0
for line in text.splitlines():
    words = line.split()
    rows[words[0]].append(float(words[1]))
    if words[0] == "save":
        size = int(words[3])
def show(name):
    v = rows[name]
    return "%s median %.2f s (%.2f-%.2f)" % (name, statistics.median(v), min(v), max(v))
print("%s model-only checkpoint, %.2f GB, %d rounds" % (flavor, size / 1e9, len(rows["save"])))
for name in ("save", "dd", "read", "load"):
    print("  " + show(name))
save, dd = statistics.median(rows["save"]), statistics.median(rows["dd"])
print("  save / dd = %.2f (target <= 1.5); save %.0f MB/s, dd %.0f MB/s" % (save / dd, size / save / 1e6, size / dd / 1e6))
PY

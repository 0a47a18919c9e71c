#!/usr/bin/env bash
# Step-time cost of [debug] numerics_trace = "blocks" and "ops" against "none" on the CPU debug
# model (seq_len 512, local_batch_size 4, 2 warm-up + 10 measured steps, trace every step,
# activation checkpointing off so "ops" is allowed). Rounds interleave none/blocks/ops, ROUNDS
# times each (default 3), so machine noise hits all three alike; prints each level's median step
# time with the min-max spread over rounds, the overheads of the medians, and whether the
# fingerprint.log of the three levels is identical (the trace must not change what is computed).
# Usage: scripts/bench_numerics.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for round in $(seq "$rounds"); do
  for level in none blocks ops; do
    dir="$out/$level-$round"
    build/titan-train --config configs/debug_model.toml --training.seq_len 512 \
      --training.local_batch_size 4 --training.steps 12 --metrics.log_freq 2 --training.device cpu \
      --activation_checkpoint.mode none --debug.seed 1 --debug.numerics_trace "$level" \
      --job.dump_folder "$dir" "$@" > "$dir.log"
  done
done

python3 - "$out" "$rounds" <<'PYEOF'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def measured_seconds(level, r):
    rows = [json.loads(l) for l in open(os.path.join(out, f"{level}-{r}", "metrics.jsonl"))]
    return sum(row["step_time_s"] * 2 for row in rows if row["step"] > 2) / 10
median = {}
for level in ("none", "blocks", "ops"):
    times = [1000 * measured_seconds(level, r) for r in range(1, rounds + 1)]
    median[level] = statistics.median(times)
    print(f"numerics_trace={level:6}  step_ms median {median[level]:.1f}  (min {min(times):.1f}, "
          f"max {max(times):.1f}; rounds: " + ", ".join(f"{t:.1f}" for t in times) + ")")
for level, target in (("blocks", 5), ("ops", 25)):
    cost = 100 * (median[level] - median["none"]) / median["none"]
    print(f"{level} costs {cost:+.1f}% step time over none (target <= {target}%)")
size = os.path.getsize(os.path.join(out, "ops-1", "numerics.log"))
print(f"numerics.log for 12 steps: blocks {os.path.getsize(os.path.join(out, 'blocks-1', 'numerics.log'))} bytes, ops {size} bytes")
fp = {l: open(os.path.join(out, f"{l}-1", "fingerprint.log")).read() for l in ("none", "blocks", "ops")}
print("fingerprint.log identical across levels:", fp["none"] == fp["blocks"] == fp["ops"])
PYEOF

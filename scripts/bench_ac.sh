#!/usr/bin/env bash
# Activation checkpointing benchmark on CPU: the debug model at seq_len 1024, local_batch_size 4,
# 2 warm-up + STEPS measured steps (default 4), for AC none, full, selective 2, and full with each
# determinism_check, ROUNDS times each (default 3), interleaved so machine noise hits all alike.
# Reports each configuration's median step time over the rounds with its min-max spread, and
# activation memory (peak RSS minus the RSS before the first step), with the ratios of medians the
# targets are stated in.
# Usage: scripts/bench_ac.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
steps=${STEPS:-4}
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # name, flags...
  local name=$1
  shift
  build/titan-train --config configs/debug_model.toml --training.seq_len 1024 \
    --training.local_batch_size 4 --training.steps $((steps + 2)) --metrics.log_freq 1 \
    --training.device cpu --debug.seed 1 --job.dump_folder "$out/$name" "$@" > "$out/$name.log"
}

for r in $(seq "$rounds"); do
  run "none-$r" --activation_checkpoint.mode none
  run "full_check_none-$r" --activation_checkpoint.mode full --activation_checkpoint.determinism_check none
  run "full_default-$r" --activation_checkpoint.mode full --activation_checkpoint.determinism_check default
  run "full_bitwise-$r" --activation_checkpoint.mode full --activation_checkpoint.determinism_check bitwise
  run "selective2-$r" --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option 2 \
    --activation_checkpoint.determinism_check default
done

python3 - "$out" "$rounds" <<'PYEOF'
import json, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def one(name):
    rows = [json.loads(l) for l in open(os.path.join(out, name, "metrics.jsonl"))]
    measured = [r["step_time_s"] for r in rows if r["step"] > 2]
    peak = max(r["memory_gib"] for r in rows)
    base = float(re.search(r"rss before the first step: ([0-9.]+) GiB", open(os.path.join(out, name + ".log")).read()).group(1))
    fp = [l for l in open(os.path.join(out, name, "fingerprint.log")) if l.startswith("step")]
    return sum(measured) / len(measured), peak, peak - base, fp
def stats(name):
    runs = [one(f"{name}-{r}") for r in range(1, rounds + 1)]
    times = [1000 * x[0] for x in runs]
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "peak": statistics.median(x[1] for x in runs), "act": statistics.median(x[2] for x in runs),
            "fp": runs[0][3]}
rows = {n: stats(n) for n in ["none", "selective2", "full_check_none", "full_default", "full_bitwise"]}
print(f"{'config':<28}{'step ms median (min-max)':>28}{'peak RSS GiB':>14}{'activation GiB':>16}")
labels = {"none": "none", "selective2": "selective 2 (default check)", "full_check_none": "full, check none",
          "full_default": "full, check default", "full_bitwise": "full, check bitwise"}
for n, r in rows.items():
    cell = f"{r['median']:.1f} ({r['min']:.1f}-{r['max']:.1f})"
    print(f"{labels[n]:<28}{cell:>28}{r['peak']:>14.3f}{r['act']:>16.3f}")
none, full = rows["none"], rows["full_check_none"]
print(f"full AC activation memory / none: {100 * full['act'] / none['act']:.1f}%   (target <= 35%)")
print(f"full AC step time / none: {full['median'] / none['median']:.2f}x   (target <= 1.3x)")
print(f"default check over plain full AC: {100 * (rows['full_default']['median'] / full['median'] - 1):+.1f}%   (target <= 3%)")
print(f"bitwise check over plain full AC: {100 * (rows['full_bitwise']['median'] / full['median'] - 1):+.1f}%   (target <= 8%)")
print("fingerprints equal to AC none:", all(r["fp"] == none["fp"] for r in rows.values()))
PYEOF

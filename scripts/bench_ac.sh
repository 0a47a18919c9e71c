#!/usr/bin/env bash
# Activation checkpointing benchmark on CPU: the debug model at seq_len 1024, local_batch_size 4,
# 2 warm-up + STEPS measured steps (default 4), for AC none, full, selective 2, and full with each
# determinism_check, ROUNDS times each (default 1), interleaved so machine noise hits all alike.
# Reports mean step time and activation memory (peak RSS minus the RSS before the first step),
# with the ratios the targets are stated in.
# Usage: scripts/bench_ac.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
steps=${STEPS:-4}
rounds=${ROUNDS:-1}
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
import json, os, re, sys
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
    mean = lambda i: sum(x[i] for x in runs) / len(runs)
    return mean(0), mean(1), mean(2), runs[0][3]
rows = {n: stats(n) for n in ["none", "selective2", "full_check_none", "full_default", "full_bitwise"]}
print(f"{'config':<28}{'step ms':>9}{'peak RSS GiB':>14}{'activation GiB':>16}")
labels = {"none": "none", "selective2": "selective 2 (default check)", "full_check_none": "full, check none",
          "full_default": "full, check default", "full_bitwise": "full, check bitwise"}
for n, (s, p, a, _) in rows.items():
    print(f"{labels[n]:<28}{1000 * s:>9.1f}{p:>14.3f}{a:>16.3f}")
none_s, _, none_a, none_fp = rows["none"]
full_s, _, full_a, _ = rows["full_check_none"]
print(f"full AC activation memory / none: {100 * full_a / none_a:.1f}%   (target <= 35%)")
print(f"full AC step time / none: {full_s / none_s:.2f}x   (target <= 1.4x)")
print(f"default check over plain full AC: {100 * (rows['full_default'][0] / full_s - 1):+.1f}%   (target <= 5%)")
print(f"bitwise check over plain full AC: {100 * (rows['full_bitwise'][0] / full_s - 1):+.1f}%   (target <= 10%)")
print("fingerprints equal to AC none:", all(rows[n][3] == none_fp for n in rows))
PYEOF

#!/usr/bin/env bash
# Cost of [debug] deterministic = true and of the fingerprint checksum on the CPU debug model
# (seq_len 512, local_batch_size 4, 2 warm-up + 10 measured steps). Runs alternate
# deterministic off/on, ROUNDS times each (default 2), so machine noise hits both alike.
# Usage: scripts/bench_determinism.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
rounds=${ROUNDS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for round in $(seq "$rounds"); do
  for det in false true; do
    dir="$out/$det-$round"
    build/titan-train --config configs/debug_model.toml --training.seq_len 512 \
      --training.local_batch_size 4 --training.steps 12 --metrics.log_freq 2 --training.device cpu \
      --debug.seed 1 --debug.deterministic="$det" --job.dump_folder "$dir" "$@" > "$dir.log"
  done
done

python3 - "$out" "$rounds" <<'PYEOF'
import json, os, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def measured_seconds(det, r):
    rows = [json.loads(l) for l in open(os.path.join(out, f"{det}-{r}", "metrics.jsonl"))]
    return sum(row["step_time_s"] * 2 for row in rows if row["step"] > 2) / 10
def checksum_pct(det, r):
    return float(re.search(r"fingerprint checksums: .* ([0-9.]+)% of the run", open(os.path.join(out, f"{det}-{r}.log")).read()).group(1))
for det in ("false", "true"):
    times = [measured_seconds(det, r) for r in range(1, rounds + 1)]
    print(f"deterministic={det:5}  step_ms per round: " + ", ".join(f"{1000 * t:.1f}" for t in times)
          + f"  mean {1000 * sum(times) / len(times):.1f}")
off = sum(measured_seconds("false", r) for r in range(1, rounds + 1))
on = sum(measured_seconds("true", r) for r in range(1, rounds + 1))
print(f"deterministic=true costs {100 * (on - off) / off:+.1f}% step time")
pct = [checksum_pct(d, r) for d in ("false", "true") for r in range(1, rounds + 1)]
print(f"fingerprint checksum (every step): {max(pct):.2f}% of run time at most")
a = open(os.path.join(out, "true-1", "fingerprint.log")).read()
b = open(os.path.join(out, f"true-{rounds}", "fingerprint.log")).read()
print("deterministic runs' fingerprint.log identical:", a == b)
PYEOF

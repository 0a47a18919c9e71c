#!/usr/bin/env bash
# Throughput benchmark: the debug model at seq_len 512, local_batch_size 4 on CPU, 2 warm-up
# steps then 10 measured steps, side by side with a plain PyTorch-eager Python loop of the same
# model and step (scripts/bench/eager_baseline.py) on the same libtorch (Debian python3-torch).
# titan-train runs without activation checkpointing, like the baseline.
# Prints tokens/s, MFU and peak RSS for titan-train, the baseline's tokens/s, and the ratio.
# Usage: scripts/bench.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "bench: installing python3-torch for the baseline"
  apt-get install -y -qq python3-torch >/dev/null
fi
threads=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

build/titan-train --config configs/debug_model.toml --training.seq_len 512 \
  --training.local_batch_size 4 --training.steps 12 --metrics.log_freq 2 \
  --training.cpu_threads "$threads" --training.device cpu --activation_checkpoint.mode none \
  --job.dump_folder "$out/titan" "$@" \
  > "$out/titan.log"

"$PY" - "$out/titan/metrics.jsonl" <<'PYEOF' | tee "$out/titan.summary"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
measured = [r for r in rows if r["step"] > 2]          # logged at steps 4, 6, ..., 12
seconds = sum(r["step_time_s"] * 2 for r in measured)  # each covers 2 steps
tokens = 10 * 4 * 512
tps = tokens / seconds
mfu = sum(r["mfu_pct"] * r["step_time_s"] for r in measured) / sum(r["step_time_s"] for r in measured)
rss = max(r["memory_gib"] for r in rows) * 1024
print(f"titan-train    tokens_per_s={tps:.1f} step_ms={1000 * seconds / 10:.1f} mfu_pct={mfu:.2f} peak_rss_mib={rss:.1f}")
PYEOF

"$PY" scripts/bench/eager_baseline.py --seq-len 512 --batch 4 --warmup-steps 2 --steps 10 \
  --threads "$threads" | tail -1 | tee "$out/eager.summary"
OMP_WAIT_POLICY=PASSIVE "$PY" scripts/bench/eager_baseline.py --seq-len 512 --batch 4 \
  --warmup-steps 2 --steps 10 --threads "$threads" | tail -1 | sed 's/^eager_baseline/eager_baseline(OMP_WAIT_POLICY=PASSIVE)/' \
  | tee "$out/eager_passive.summary"

"$PY" - "$out" <<'PYEOF'
import re, sys, os
def tps(name):
    return float(re.search(r"tokens_per_s=([0-9.]+)", open(os.path.join(sys.argv[1], name)).read()).group(1))
t = tps("titan.summary")
print(f"speedup vs plain eager: {t / tps('eager.summary'):.2f}x   "
      f"vs eager with OMP_WAIT_POLICY=PASSIVE: {t / tps('eager_passive.summary'):.2f}x   (target >= 3x plain)")
PYEOF

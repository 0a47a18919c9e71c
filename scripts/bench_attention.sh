#!/usr/bin/env bash
# Forward and backward time of the CPU attention kernels, fused_avx2_fma against blocked_aten, on
# the same inputs in alternating rounds; medians with their min-max spread, and the largest
# difference between their results.
#
#   scripts/bench_attention.sh                 (32 heads of 512 x 16, the debug model's layer at
#                                               local_batch_size 2; 15 rounds; 1 thread)
#   HEADS=64 T=512 D=16 ROUNDS=15 THREADS=2 scripts/bench_attention.sh
#
# Builds build/titan-bench-attention (scripts/build.sh first). Idle threads sleep, as in
# titan-train (OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4, unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
heads=${HEADS:-32} T=${T:-512} D=${D:-16} rounds=${ROUNDS:-15} threads=${THREADS:-1}
cmake --build build --target titan-bench-attention >/dev/null
out=$(OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4} \
  build/titan-bench-attention "$heads" "$T" "$D" "$rounds" "$threads")
python3 - "$heads" "$T" "$D" "$threads" "$out" <<'PY'
import statistics, sys
heads, T, D, threads, text = sys.argv[1:]
times = {}
for line in text.splitlines():
    words = line.split()
    if words[0] == "max_abs_diff":
        diffs = words[1:]
        continue
    times.setdefault(words[0], {"fwd": [], "bwd": []})
    times[words[0]]["fwd"].append(float(words[2]))
    times[words[0]]["bwd"].append(float(words[4]))
def show(v):
    return "%.2f ms (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
print("causal attention, %s heads of %s x %s, %s thread(s), %d rounds (median, min-max)"
      % (heads, T, D, threads, len(times["fused_avx2_fma"]["fwd"])))
for name, t in times.items():
    print("  %-15s forward %s  backward %s" % (name, show(t["fwd"]), show(t["bwd"])))
f, b = times["fused_avx2_fma"], times["blocked_aten"]
print("  blocked_aten / fused_avx2_fma: forward %.2fx, backward %.2fx"
      % (statistics.median(b["fwd"]) / statistics.median(f["fwd"]),
         statistics.median(b["bwd"]) / statistics.median(f["bwd"])))
print("  largest |fused - blocked|: out %s, dq %s, dk %s, dv %s" % tuple(diffs))
PY

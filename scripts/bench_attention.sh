#!/usr/bin/env bash
# Forward and backward time of the CPU attention kernels (fused_avx512 where the CPU has it,
# fused_avx2_fma, blocked_aten) on the same inputs in alternating rounds: medians with their
# min-max spread, each median as GFLOP/s (the causal FLOPs the kernels compute: 2 T (T + 1) D a
# head forward, twice that backward) and as a share of the sgemm rate titan-train measures for MFU,
# on the same threads; and the largest difference between the fused and blocked results.
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
    if words[0] == "sgemm_gflops":
        sgemm = float(words[1])
        continue
    times.setdefault(words[0], {"fwd": [], "bwd": []})
    times[words[0]]["fwd"].append(float(words[2]))
    times[words[0]]["bwd"].append(float(words[4]))
heads, T, D = int(heads), int(T), int(D)
flops = {"fwd": 2.0 * heads * T * (T + 1) * D, "bwd": 4.0 * heads * T * (T + 1) * D}
def show(v, kind):
    med = statistics.median(v)
    gflops = flops[kind] / (med * 1e-3) / 1e9
    return "%.2f ms (%.2f-%.2f), %.1f GFLOP/s = %.0f%% of sgemm" % (
        med, min(v), max(v), gflops, 100 * gflops / sgemm)
rounds = len(next(iter(times.values()))["fwd"])
print("causal attention, %d heads of %d x %d, %s thread(s), %d rounds (median, min-max)"
      % (heads, T, D, threads, rounds))
print("  sgemm (1024^3, best of 10, as titan-train measures it): %.1f GFLOP/s" % sgemm)
for name, t in times.items():
    print("  %-15s forward %s" % (name, show(t["fwd"], "fwd")))
    print("  %-15s backward %s" % ("", show(t["bwd"], "bwd")))
f, b = times["fused_avx2_fma"], times["blocked_aten"]
print("  blocked_aten / fused_avx2_fma: forward %.2fx, backward %.2fx"
      % (statistics.median(b["fwd"]) / statistics.median(f["fwd"]),
         statistics.median(b["bwd"]) / statistics.median(f["bwd"])))
if "fused_avx512" in times:
    w = times["fused_avx512"]
    print("  fused_avx2_fma / fused_avx512: forward %.2fx, backward %.2fx"
          % (statistics.median(f["fwd"]) / statistics.median(w["fwd"]),
             statistics.median(f["bwd"]) / statistics.median(w["bwd"])))
print("  largest |fused - blocked|: out %s, dq %s, dk %s, dv %s" % tuple(diffs))
PY

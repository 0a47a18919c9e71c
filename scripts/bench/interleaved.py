#!/usr/bin/env python3
"""Throughput of titan-train against the best-tuned PyTorch-eager loop, in interleaved rounds.

Driven by scripts/bench.sh. The debug model at seq_len 512, local_batch_size 4 on CPU, AC off;
each run does --warmup-steps untimed steps, then --steps timed ones.

1. The eager baseline's settings are tuned once: each candidate (OMP_WAIT_POLICY unset or
   PASSIVE, OpenBLAS threads all or 1, torch threads all or 1) runs a short loop, and the
   fastest is kept and printed.
2. Then titan-train and that baseline alternate (A, B, A, B, ...) for --rounds rounds, so the
   machine's noise hits both alike; each side's median tokens/s is printed with its min-max
   spread, with the ratio of the medians, titan-train's median MFU (against the sgemm peak that
   each run measures at start), and its share of CPU time in the kernel (system / (user +
   system), over the timed steps from metrics.jsonl's cpu_user_s / cpu_system_s, and over the
   whole run from getrusage in titan-train's end-of-run line).

Only the standard library is used; the baseline needs torch (Debian's python3-torch).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def titan_run(args, out, tag):
    folder = os.path.join(out, tag)
    steps = args.warmup_steps + args.steps
    cmd = [os.path.join(ROOT, "build", "titan-train"), "--config",
           os.path.join(ROOT, "configs", "debug_model.toml"), "--training.seq_len", "512",
           "--training.local_batch_size", "4", "--training.steps", str(steps),
           "--metrics.log_freq", "1", "--training.device", "cpu",
           "--activation_checkpoint.mode", "none", "--debug.seed", "1",
           "--job.dump_folder", folder] + args.titan_flags
    log = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl"))]
    timed = [r for r in rows if r["step"] > args.warmup_steps]
    seconds = sum(r["step_time_s"] for r in timed)
    m = re.search(r"user ([0-9.]+) s, system ([0-9.]+) s", log)
    user, system = (float(m.group(1)), float(m.group(2))) if m else (float("nan"),) * 2
    timed_user = sum(r["cpu_user_s"] for r in timed)
    timed_system = sum(r["cpu_system_s"] for r in timed)
    return {
        "tps": 4 * 512 * len(timed) / seconds,
        "mfu": statistics.median(r["mfu_pct"] for r in timed),
        "kernel_pct": 100 * timed_system / (timed_user + timed_system),
        "kernel_pct_run": 100 * system / (user + system),
        "blas_kernels": re.search(r"blas_kernels +(.*)", log).group(1) if "blas_kernels" in log
        else "not OpenBLAS",
    }


def eager_run(args, env_extra, threads, steps):
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.update(env_extra)
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench", "eager_baseline.py"),
           "--seq-len", "512", "--batch", "4", "--warmup-steps", str(args.warmup_steps),
           "--steps", str(steps), "--threads", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r"tokens_per_s=([0-9.]+)", out).group(1))


def best_eager_setting(args):
    cores = os.cpu_count()
    candidates = []
    for wait in ({}, {"OMP_WAIT_POLICY": "PASSIVE"}):
        for blas in ({}, {"OPENBLAS_NUM_THREADS": "1"}):
            for threads in sorted({cores, 1}, reverse=True):
                candidates.append((dict(wait, **blas), threads))
    results = []
    for env, threads in candidates:
        tps = eager_run(args, env, threads, args.tuning_steps)
        label = " ".join(f"{k}={v}" for k, v in env.items()) or "(defaults)"
        print(f"  eager candidate: {label}, torch threads {threads}: {tps:.1f} tokens/s")
        results.append((tps, env, threads, label))
    best = max(results, key=lambda r: r[0])
    print(f"best-tuned eager setting: {best[3]}, torch threads {best[2]}")
    return best[1], best[2]


def spread(values):
    return f"median {statistics.median(values):.1f} (min {min(values):.1f}, max {max(values):.1f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--tuning-steps", type=int, default=3)
    p.add_argument("titan_flags", nargs="*", help="extra titan-train flags")
    args = p.parse_args()
    env, threads = best_eager_setting(args)
    titan, eager = [], []
    with tempfile.TemporaryDirectory() as out:
        for r in range(1, args.rounds + 1):
            titan.append(titan_run(args, out, f"titan-{r}"))
            eager.append(eager_run(args, env, threads, args.steps))
            print(f"  round {r}: titan-train {titan[-1]['tps']:.1f} tokens/s, "
                  f"eager {eager[-1]:.1f} tokens/s")
    t_tps = [x["tps"] for x in titan]
    print(f"BLAS kernels (both sides, the same environment): {titan[0]['blas_kernels']}")
    print(f"titan-train tokens/s {spread(t_tps)}")
    print(f"eager (best-tuned) tokens/s {spread(eager)}")
    print(f"ratio of medians: {statistics.median(t_tps) / statistics.median(eager):.2f}x "
          "(target >= 3x)")
    print(f"titan-train MFU % of the measured sgemm peak: {spread([x['mfu'] for x in titan])} "
          "(target >= 70)")
    print(f"titan-train kernel share of CPU time % over the timed steps: "
          f"{spread([x['kernel_pct'] for x in titan])} (target <= 5)")
    print(f"  the same over the whole run (start-up and warm-up included): "
          f"{spread([x['kernel_pct_run'] for x in titan])}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cost of torchtitan's validation and profiling per step on the CPU debug model.

The debug model at seq_len 512, 4 sequences a step, AC off, 12 steps on 1 rank. Variants: the
plain run; validation every step (validation.freq 1, steps 1, the same batch shape, on the
synthetic set); validation every 5th step; profiling (profile_freq 4, warmup 1, active 1: steps
4, 8 and 12 recorded, libtorch's profiler). Rounds interleave the variants. Prints each variant's
median wall time per step (the whole run divided by the steps, start-up included alike) with its
min-max spread, the difference to the plain run per step, and the instrument's own cost line
(what titan-train's end-of-run summary says it spent).

Used by scripts/bench_instruments.sh. Standard library only.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

from data_parallel import ROOT, spread

STEPS = 12
VALIDATE = ["--validation.enable", "true", "--validation.dataset", "synthetic",
            "--validation.local_batch_size", "4", "--validation.seq_len", "512",
            "--validation.steps", "1"]
VARIANTS = [("plain", []),
            ("validation every step", VALIDATE + ["--validation.freq", "1"]),
            ("validation every 5th step", VALIDATE + ["--validation.freq", "5"]),
            ("profiling 3 of 12 steps", ["--profiling.enable_profiling", "true",
                                         "--profiling.profile_freq", "4",
                                         "--profiling.profiler_warmup", "1",
                                         "--profiling.profiler_active", "1"])]


def run(folder, flags, extra):
    cmd = [os.path.join(ROOT, "build", "titan-train"),
           "--config", os.path.join(ROOT, "configs", "debug_model.toml"),
           "--training.seq_len", "512", "--training.local_batch_size", "4",
           "--training.steps", str(STEPS), "--metrics.log_freq", "1",
           "--training.device", "cpu", "--activation_checkpoint.mode", "none",
           "--debug.seed", "1", "--job.dump_folder", folder] + flags + extra
    start = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    seconds = time.monotonic() - start
    text = out.stdout + out.stderr
    cost = [line.strip() for line in text.splitlines()
            if re.search(r"(validation|profil\w*):.*% of the run", line)]
    return seconds / STEPS, cost


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="extra titan-train flags")
    args = parser.parse_args()
    results = {name: [] for name, _ in VARIANTS}
    costs = {}
    with tempfile.TemporaryDirectory(prefix="bench_instruments_") as tmp:
        for i in range(args.rounds):
            for v, (name, flags) in enumerate(VARIANTS):
                per_step, cost = run(os.path.join(tmp, f"r{i}_{v}"), flags, args.extra)
                results[name].append(per_step)
                costs[name] = cost
                print(f"round {i + 1}: {name}: {per_step:.3f} s per step", flush=True)
    base = statistics.median(results["plain"])
    for name, _ in VARIANTS:
        med = statistics.median(results[name])
        print(f"{name:28s} {spread(results[name], '{:.3f}')} s per step, "
              f"{1000 * (med - base):+.0f} ms per step against plain ({med / base:.2f}x)")
        for line in costs[name]:
            print(f"    last round's summary: {line}")


if __name__ == "__main__":
    main()

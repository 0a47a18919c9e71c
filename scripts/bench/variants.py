#!/usr/bin/env python3
"""Step time of titan-train variants on the CPU debug model, in interleaved rounds.

Each variant is NAME=FLAGS (titan-train flags, space-separated); the first is the reference.
Every run is the debug model at seq_len 512, local_batch_size 4, AC off unless a variant's
flags say otherwise, 2 warm-up + 10 measured steps. Rounds run the variants in turn (A, B, C,
A, B, C, ...), so the machine's noise hits all alike. Prints each variant's median step time with
its min-max spread, its overhead over the reference (ratio of medians) against --target percent,
the lines of the first round's logs that match --grep, the sizes of --file in each variant's dump
folder, and whether fingerprint.log is identical across variants.

Used by scripts/bench_numerics.sh and scripts/bench_rerun.sh. Standard library only.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(folder, flags, extra):
    cmd = [os.path.join(ROOT, "build", "titan-train"), "--config",
           os.path.join(ROOT, "configs", "debug_model.toml"), "--training.seq_len", "512",
           "--training.local_batch_size", "4", "--training.steps", "12",
           "--metrics.log_freq", "2", "--training.device", "cpu",
           "--activation_checkpoint.mode", "none", "--debug.seed", "1",
           "--job.dump_folder", folder] + flags + extra
    log = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl"))]
    step_ms = 1000 * sum(r["step_time_s"] * 2 for r in rows if r["step"] > 2) / 10
    return step_ms, log


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", type=float, action="append", default=[],
                   help="overhead target in percent, one per non-reference variant")
    p.add_argument("--grep", action="append", default=[],
                   help="print first-round log lines containing this (repeatable)")
    p.add_argument("--file", default=None,
                   help="print the size of this dump-folder file (a glob: the matches' total) "
                        "per variant")
    p.add_argument("--variant", action="append", required=True, help="NAME=FLAGS")
    p.add_argument("extra", nargs="*", help="extra titan-train flags for every run")
    args = p.parse_args()
    variants = [v.split("=", 1) for v in args.variant]
    times = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory() as out:
        for r in range(1, args.rounds + 1):
            for name, flags in variants:
                ms, log = run(os.path.join(out, f"{name}-{r}"), flags.split(), args.extra)
                times[name].append(ms)
                if r == 1 and args.grep:
                    for line in log.splitlines():
                        if any(g in line for g in args.grep):
                            print(f"{name}: {line.split('] ', 1)[-1]}")
        reference = statistics.median(times[variants[0][0]])
        for i, (name, _) in enumerate(variants):
            t = times[name]
            median = statistics.median(t)
            line = (f"{name:<10} step_ms median {median:.1f} (min {min(t):.1f}, max {max(t):.1f};"
                    f" rounds: {', '.join(f'{x:.1f}' for x in t)})")
            if i > 0:
                line += f"  overhead {100 * (median - reference) / reference:+.1f}%"
                if i - 1 < len(args.target):
                    line += f" (target <= {args.target[i - 1]:g}%)"
            print(line)
        if args.file:
            sizes = []
            for name, _ in variants:
                found = glob.glob(os.path.join(out, f"{name}-1", args.file))
                if found:
                    sizes.append(f"{name} {sum(os.path.getsize(f) for f in found)}")
            print(f"{args.file} for 12 steps, bytes: {', '.join(sizes)}")
        prints = {open(os.path.join(out, f"{name}-1", "fingerprint.log")).read()
                  for name, _ in variants}
        print("fingerprint.log identical across variants:", len(prints) == 1)


if __name__ == "__main__":
    main()

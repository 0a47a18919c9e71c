#!/usr/bin/env python3
"""Step time and peak memory of debug.batch_invariant against the normal step.

The CPU debug model at seq_len 512, 4 sequences a step, AC off, 2 warm-up + 8 measured steps
(metrics every step), on 1 rank (all cores) and on 2 ranks (2 sequences each, half the cores
each). Variants per world size: the normal batched step; the normal step in micro-batches of one
sequence (the same one-sequence forward and backward, gradients accumulated by autograd); and
batch_invariant (one sequence at a time, summed in the pairwise tree, ranks gathered bit for bit).
The middle variant splits the cost: sequence-at-a-time compute against the tree and the gather.
Rounds interleave every variant. Prints the median step time and rank 0's peak RSS with min-max
spreads, and each variant's ratio to the normal step.

Used by scripts/bench_batch_invariant.sh. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import tempfile

from data_parallel import ROOT, run_ranks, spread

STEPS, WARMUP = 10, 2
VARIANTS = [("normal", ["--training.local_batch_size", "{batch}"]),
            ("normal, 1-sequence micro-batches", ["--training.local_batch_size", "1"]),
            ("batch_invariant", ["--training.local_batch_size", "{batch}",
                                 "--debug.batch_invariant", "true"])]


def run(folder, ranks, flags, extra):
    cmd = ["/usr/bin/time", "-f", "maxrss_kib %M", os.path.join(ROOT, "build", "titan-train"),
           "--config", os.path.join(ROOT, "configs", "debug_model.toml"),
           "--training.seq_len", "512", "--training.global_batch_size", "4",
           "--training.steps", str(STEPS), "--metrics.log_freq", "1",
           "--training.device", "cpu", "--activation_checkpoint.mode", "none",
           "--debug.seed", "1", "--job.dump_folder", folder]
    cmd += [f.format(batch=4 // ranks) for f in flags] + extra
    outputs = run_ranks(cmd, ranks)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    step_s = statistics.median(r["step_time_s"] for r in rows if r["step"] > WARMUP)
    rss_mib = int(re.search(r"maxrss_kib (\d+)", outputs[0]).group(1)) / 1024
    return step_s, rss_mib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="extra titan-train flags")
    args = parser.parse_args()
    results = {(ranks, name): [] for ranks in (1, 2) for name, _ in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench_bi_") as tmp:
        for i in range(args.rounds):
            for ranks in (1, 2):
                for v, (name, flags) in enumerate(VARIANTS):
                    folder = os.path.join(tmp, f"r{i}_{ranks}_{v}")
                    step_s, rss = run(folder, ranks, flags, args.extra)
                    results[(ranks, name)].append((step_s, rss))
                    print(f"round {i + 1}: {ranks} rank(s), {name}: step {step_s:.3f} s, "
                          f"rank 0 peak RSS {rss:.0f} MiB", flush=True)
    for ranks in (1, 2):
        base = statistics.median(s for s, _ in results[(ranks, "normal")])
        for name, _ in VARIANTS:
            rows = results[(ranks, name)]
            steps = [s for s, _ in rows]
            print(f"{ranks} rank(s) {name:34s} step {spread(steps, '{:.3f}')} s = "
                  f"{statistics.median(steps) / base:.2f}x normal; peak RSS "
                  f"{spread([m for _, m in rows], '{:.0f}')} MiB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""titan-train's step on each debug.cpu_linear backend (aten, onednn), in interleaved rounds.

Driven by scripts/bench_linear.sh. Each round runs the debug model at seq_len 512 x batch 4 (and,
with --wide, debugmodel_wide at 512 x 1) once per backend, alternating, through the same runner
as scripts/bench.sh (scripts/bench/interleaved.py's titan_run: AC off, the steps after the
warm-up timed). Prints, per backend and model, the median tokens/s and MFU (against the sgemm
peak each run measures on its own backend) with their min-max spreads, and the ratio of medians.
Only the standard library is used.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleaved import titan_run  # noqa: E402

BACKENDS = ["aten", "onednn"]


def spread(values, unit=""):
    return f"{statistics.median(values):.1f}{unit} ({min(values):.1f}-{max(values):.1f})"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--wide", action="store_true")
    args = p.parse_args()
    models = [("debug model 512x4", 512, 4, False)]
    if args.wide:
        models.append(("debugmodel_wide 512x1", 512, 1, True))
    results = {(m[0], b): [] for m in models for b in BACKENDS}
    with tempfile.TemporaryDirectory() as out:
        for r in range(1, args.rounds + 1):
            for name, seq_len, batch, wide in models:
                for backend in BACKENDS:
                    args.titan_flags = ["--debug.cpu_linear", backend]
                    got = titan_run(args, out, f"{backend}-{wide}-{r}", seq_len, batch, wide)
                    results[(name, backend)].append(got)
                    print(f"  round {r} {name} {backend}: {got['tps']:.1f} tokens/s, "
                          f"MFU {got['mfu']:.1f}%", flush=True)
    for name, _, _, _ in models:
        medians = {}
        for backend in BACKENDS:
            runs = results[(name, backend)]
            tps = [x["tps"] for x in runs]
            medians[backend] = statistics.median(tps)
            print(f"{name} {backend}: {spread(tps)} tokens/s, MFU "
                  f"{spread([x['mfu'] for x in runs], '%')}")
        print(f"{name} onednn / aten: {medians['onednn'] / medians['aten']:.2f}x")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""1 process against 2 data-parallel processes (Gloo on loopback) on the CPU debug model.

Each run is the debug model at seq_len 512, local_batch_size 4 per rank, AC off, 2 warm-up + 8
measured steps (metrics every step). Rounds interleave 1 rank, 2 ranks, 1 rank, ... so the
machine's noise hits both alike. Each side gets all the cores: 1 process uses them all, 2 use
half each (titan-train's default for several local processes). Prints the median tokens/s over
all ranks with its min-max spread, the ratio, and for 2 ranks the gradient all-reduce time per
step and its share of the step (from the run's end-of-run line; the all-reduce runs after the
backward, so none of it is hidden behind it).

Used by scripts/bench_dp.sh. Standard library only.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS, WARMUP = 10, 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(cmd, ranks, env_extra=None):
    """Runs `cmd` as `ranks` processes with torchrun's variables (one process: none); exits
    naming the failure unless all succeed. Returns each rank's output."""
    return run_ranks_measured(cmd, ranks, env_extra)[0]


def run_ranks_measured(cmd, ranks, env_extra=None):
    """run_ranks, also returning each rank's peak resident memory in MiB (its rusage)."""
    port = free_port()
    procs = []
    for rank in range(ranks):
        env = dict(os.environ)
        env.update(env_extra or {})
        if ranks > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [p.stdout.read() for p in procs]
    peaks = []
    for p, out in zip(procs, outputs):
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        peaks.append(usage.ru_maxrss / 1024)
        if p.returncode != 0:
            raise SystemExit(f"titan-train failed ({p.returncode}):\n{out[-3000:]}")
    return outputs, peaks


def run(folder, ranks, extra):
    cmd = [os.path.join(ROOT, "build", "titan-train"), "--config",
           os.path.join(ROOT, "configs", "debug_model.toml"), "--training.seq_len", "512",
           "--training.local_batch_size", "4", "--training.steps", str(STEPS),
           "--metrics.log_freq", "1", "--training.device", "cpu",
           "--activation_checkpoint.mode", "none", "--debug.seed", "1",
           "--job.dump_folder", folder] + extra
    outputs = run_ranks(cmd, ranks)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    per_rank = statistics.median(r["tps"] for r in rows if r["step"] > WARMUP)
    reduce_ms = share = None
    m = re.search(r"gradient all-reduce: mean ([\d.]+) ms per step, ([\d.]+)%", outputs[0])
    if m:
        reduce_ms, share = float(m.group(1)), float(m.group(2))
    return per_rank * ranks, reduce_ms, share


def spread(values, fmt="{:,.0f}"):
    return (f"{fmt.format(statistics.median(values))} "
            f"({fmt.format(min(values))}-{fmt.format(max(values))})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("extra", nargs="*", help="extra titan-train flags")
    args = parser.parse_args()
    tps = {1: [], 2: []}
    reduce_ms, shares = [], []
    with tempfile.TemporaryDirectory(prefix="bench_dp_") as tmp:
        for i in range(args.rounds):
            for ranks in (1, 2):
                total, ms, share = run(os.path.join(tmp, f"r{i}_{ranks}"), ranks, args.extra)
                tps[ranks].append(total)
                if ms is not None:
                    reduce_ms.append(ms)
                    shares.append(share)
                print(f"round {i + 1}: {ranks} rank(s): {total:,.0f} tokens/s in all"
                      + (f", all-reduce {ms:.1f} ms per step ({share:.1f}%)" if ms else ""),
                      flush=True)
    print(f"1 rank : median {spread(tps[1])} tokens/s")
    print(f"2 ranks: median {spread(tps[2])} tokens/s in all, "
          f"{statistics.median(tps[2]) / statistics.median(tps[1]):.2f}x one rank")
    print(f"2 ranks: gradient all-reduce median {spread(reduce_ms, '{:.1f}')} ms per step, "
          f"{spread(shares, '{:.1f}')}% of the step time; hidden behind the backward: 0% "
          f"(it runs after the backward)")


if __name__ == "__main__":
    main()

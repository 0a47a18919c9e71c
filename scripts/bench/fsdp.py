#!/usr/bin/env python3
"""FSDP against replication (Gloo on loopback) at 1, 2 and 4 ranks: memory and speed.

Each run is debugmodel_wide (107M parameters) on the CPU at seq_len 256, local_batch_size 2 per
rank, AC off, 1 warm-up + 4 measured steps. Rounds interleave every variant (1 rank; 2 and 4
ranks replicated; 2 and 4 ranks FSDP, prefetched and not; HSDP 2 x 2) so that the machine's noise hits all
alike. Prints per variant: the median peak RSS per rank (max over ranks) with its spread against
the model state a rank holds by the memory check's count (16 B a parameter / shard degree plus
the largest unit gathered, at least the 4 B a parameter each rank builds first), the peak up to
the first step (the start-up line "rss before the first step", max over ranks) against the whole
weights (4 B a parameter: a replica holds them, a shard its rows), tokens/s over all ranks, and for FSDP the all-gather waits and reduce-scatter time per step (the run's
end-of-run line). With --mixed-precision the variants are 2 ranks replicated and FSDP under
bfloat16 autocast (FSDP then all-gathers in bfloat16), FSDP in float32, and FSDP reducing in
bfloat16 (training.mixed_precision_reduce).

Used by scripts/bench_fsdp.sh. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import tempfile

from data_parallel import ROOT, run_ranks_measured, spread

STEPS, WARMUP = 5, 1
# debugmodel_wide: dim 1024, 8 blocks, vocab 2048, FFN hidden 2816 (multiple_of 256).
DIM, LAYERS, VOCAB, HIDDEN = 1024, 8, 2048, 2816
BLOCK = 4 * DIM * DIM + 3 * DIM * HIDDEN + 2 * DIM  # attention, SwiGLU, two norms
PARAMS = LAYERS * BLOCK + 2 * VOCAB * DIM + DIM  # 106,972,160


def run(folder, ranks, shard, prefetch, extra):
    """One run of a variant; `extra`: its flags and the command line's."""
    cmd = [os.path.join(ROOT, "build", "titan-train"), "--model.flavor", "debugmodel_wide",
           "--training.seq_len", "256", "--training.local_batch_size", "2",
           "--training.steps", str(STEPS), "--metrics.log_freq", "1",
           "--training.device", "cpu", "--activation_checkpoint.mode", "none",
           "--debug.seed", "1", "--job.dump_folder", folder] + extra
    if ranks > 1 and shard == 1:
        cmd += ["--parallelism.data_parallel_shard_degree", "1",
                "--parallelism.data_parallel_replicate_degree", "-1"]
    elif shard < ranks:  # HSDP
        cmd += ["--parallelism.data_parallel_replicate_degree", str(ranks // shard)]
    env = {"LOG_RANK": ",".join(str(r) for r in range(ranks))}  # every rank's start-up lines
    if not prefetch:
        env["TITAN_FSDP_PREFETCH"] = "0"
    outputs, peaks = run_ranks_measured(cmd, ranks, env)
    start = [float(m.group(1)) * 1024 for out in outputs for m in re.finditer(
        r"rss before the first step: [\d.]+ GiB \(peak so far ([\d.]+) GiB\)", out)]
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    tps = statistics.median(r["tps"] for r in rows if r["step"] > WARMUP) * ranks
    gather = scatter = None
    m = re.search(r"FSDP: all-gather waits ([\d.]+) ms per step .*reduce-scatters ([\d.]+) ms",
                  outputs[0])
    if m:
        gather, scatter = float(m.group(1)), float(m.group(2))
    return max(peaks), tps, gather, scatter, max(start)


def model_state_mib(shard):
    largest = max(BLOCK, VOCAB * DIM + DIM)  # a block (the memory check's largest_unit_params)
    if shard == 1:
        return 16 * PARAMS / 2**20
    return max(4 * PARAMS, 16 * PARAMS / shard + 8 * largest) / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mixed-precision", action="store_true",
                        help="FSDP's bfloat16 all-gather and reduce-scatter against float32")
    parser.add_argument("extra", nargs="*", help="extra titan-train flags")
    args = parser.parse_args()
    # (name, ranks, shard degree: 1 replicates, below the ranks is HSDP, prefetch, flags)
    variants = [("1 rank", 1, 1, True, []), ("2 replicated", 2, 1, True, []),
                ("2 FSDP", 2, 2, True, []), ("2 FSDP no prefetch", 2, 2, False, []),
                ("4 replicated", 4, 1, True, []), ("4 FSDP", 4, 4, True, []),
                ("4 HSDP 2 x 2", 4, 2, True, [])]
    if args.mixed_precision:
        bf16 = ["--training.mixed_precision_param", "bfloat16"]
        variants = [("2 replicated bf16", 2, 1, True, bf16), ("2 FSDP float32", 2, 2, True, []),
                    ("2 FSDP bf16 gather", 2, 2, True, bf16),
                    ("2 FSDP bf16 reduce", 2, 2, True,
                     ["--training.mixed_precision_reduce", "bfloat16"])]
    results = {v[0]: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench_fsdp_") as tmp:
        for i in range(args.rounds):
            for name, ranks, shard, prefetch, flags in variants:
                folder = os.path.join(tmp, f"r{i}_{name.replace(' ', '_')}")
                r = run(folder, ranks, shard, prefetch, flags + args.extra)
                results[name].append(r)
                print(f"round {i + 1}: {name}: peak RSS {r[0]:,.0f} MiB a rank "
                      f"({r[4]:,.0f} before step 1), {r[1]:,.0f} tokens/s" +
                      (f", all-gather waits {r[2]:.1f} ms, reduce-scatter {r[3]:.1f} ms a step"
                       if r[2] is not None else ""), flush=True)
    for name, ranks, shard, _, _ in variants:
        rows = results[name]
        line = (f"{name:20s}: peak RSS {spread([r[0] for r in rows])} MiB a rank "
                f"(model state counted: {model_state_mib(shard):,.0f} MiB), before step 1 "
                f"{spread([r[4] for r in rows])} MiB (whole weights {4 * PARAMS / 2**20:,.0f} "
                f"MiB), {spread([r[1] for r in rows])} tokens/s")
        if shard > 1:
            line += (f", all-gather waits {spread([r[2] for r in rows], '{:.1f}')} ms, "
                     f"reduce-scatter {spread([r[3] for r in rows], '{:.1f}')} ms a step")
        print(line)


if __name__ == "__main__":
    main()

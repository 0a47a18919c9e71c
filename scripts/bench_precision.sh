#!/usr/bin/env bash
# Cost of a precision step (debug.precision_steps) on the CPU debug model (seq_len 512,
# local_batch_size 4, AC off, 8 steps, the 6th probed), float32 and bf16 autocast, against the
# same run without it. Rounds interleave the variants, ROUNDS times each (default 3). Prints per
# variant the median (min-max) of the run's own "precision steps: X s each, Nx a step" figures and
# of the process's peak RSS, whether fingerprint.log is identical to the unprobed run's, and the
# first round's five ops adding the most error.
# Usage: scripts/bench_precision.sh [extra titan-train flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec python3 - "${ROUNDS:-3}" "$@" <<'PY'
import json, os, re, statistics, subprocess, sys, tempfile
rounds, extra = int(sys.argv[1]), sys.argv[2:]
variants = [("float32", []), ("float32 probed", ["--debug.precision_steps", "6"]),
            ("bf16", ["--training.mixed_precision_param", "bfloat16"]),
            ("bf16 probed", ["--training.mixed_precision_param", "bfloat16",
                             "--debug.precision_steps", "6"])]
results = {name: [] for name, _ in variants}
def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"
with tempfile.TemporaryDirectory() as out:
    for r in range(rounds):
        for name, flags in variants:
            folder = os.path.join(out, f"{name.replace(' ', '_')}-{r}")
            cmd = ["/usr/bin/time", "-f", "maxrss_kib %M", "build/titan-train", "--config",
                   "configs/debug_model.toml", "--training.seq_len", "512",
                   "--training.local_batch_size", "4", "--training.steps", "8",
                   "--training.device", "cpu", "--activation_checkpoint.mode", "none",
                   "--debug.seed", "1", "--job.dump_folder", folder] + flags + extra
            p = subprocess.run(cmd, check=True, capture_output=True, text=True)
            log = p.stdout + p.stderr
            rss = int(re.search(r"maxrss_kib (\d+)", log).group(1)) / 1024
            m = re.search(r"precision steps: ([0-9.]+) s each .*, ([0-9.]+)x a step's ([0-9.]+) s", log)
            fp = open(os.path.join(folder, "fingerprint.log")).read()
            results[name].append((rss, m, fp, folder))
            if r == 0 and m:
                report = json.load(open(os.path.join(folder, "precision", "step6.json")))
                ops = sorted(report["ops"], key=lambda o: -(o["added_rel_error"] or 0))[:5]
                print(f"{name}: the five ops adding the most error at step 6:")
                for o in ops:
                    print(f"  layers.{o['block']} #{o['index']} {o['name']} {o['dtype']} "
                          f"added {o['added_rel_error']:.3e} (error {o['rel_error']:.3e})")
                print(f"  loss rel_error {report['loss']['rel_error']:.3e}, grad_norm rel_error "
                      f"{report['grad_norm']['rel_error']:.3e}")
    for name, _ in variants:
        rows = results[name]
        line = f"{name:16s} peak RSS {spread([x[0] for x in rows], '{:.0f}')} MiB"
        if rows[0][1]:
            line += (f", precision step {spread([float(x[1].group(1)) for x in rows], '{:.2f}')} s"
                     f" = {spread([float(x[1].group(2)) for x in rows], '{:.1f}')}x the run's mean step"
                     f" ({spread([float(x[1].group(3)) for x in rows], '{:.3f}')} s)")
        base = results[name.replace(" probed", "")]
        if name.endswith("probed"):
            same = all(x[2] == y[2] for x, y in zip(rows, base))
            line += f", fingerprint.log identical to {name.replace(' probed', '')}'s: {same}"
        print(line)
PY

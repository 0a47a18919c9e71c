#!/usr/bin/env python3
"""Plot loss, grad_norm and lr against step for one or more titan-train runs.

Usage: scripts/plot_runs.py RUN [RUN ...] -o runs.png [--titan-train build/titan-train]
       scripts/plot_runs.py RUN [RUN ...] -o layers.png --layers
       scripts/plot_runs.py --precision RUN STEP -o precision.png

Each RUN is a dump folder (job.dump_folder) or its metrics.jsonl; curves are labelled by the
folder's name. With exactly two runs, the first step where their numerics part (from
`titan-train compare --json`, which reads their fingerprint.log) is marked on every panel.
With --layers, the per-layer view instead: for each run a heatmap of update/weight (the optimizer
update's norm over the weights', from metrics.jsonl's "layers") by part of the model against
step, on a log scale, the largest marked.
With --precision RUN STEP, the report of a precision step (debug.precision_steps:
RUN/precision/step<STEP>.json): each op's added error (the op alone, in the run's dtype, against
the float64 reference) as bars grouped by block, on a log scale, the worst op marked.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"plot_runs.py needs matplotlib, which {sys.executable} cannot import: "
                 "apt-get install python3-matplotlib (for Debian's /usr/bin/python3), "
                 "or pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def run_folder(run):
    return os.path.dirname(os.path.abspath(run)) if run.endswith(".jsonl") else run


def read_metrics(run):
    path = run if run.endswith(".jsonl") else os.path.join(run, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"plot_runs.py: {run}: no metrics.jsonl (pass a dump folder or its metrics.jsonl)")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_runs.py: {path}:{number}: not JSON ({e.msg})")
    if not rows:
        sys.exit(f"plot_runs.py: {path}: no logged steps")
    return rows


def as_float(v):
    # metrics.jsonl writes non-finite numbers as strings ("nan", "inf").
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def divergent_step(binary, a, b):
    """The first step where runs a and b part, None when they agree; (None, why) on failure."""
    if not binary or not os.path.exists(binary):
        return None, "titan-train not found: divergence not marked (use --titan-train)"
    p = subprocess.run([binary, "compare", run_folder(a), run_folder(b), "--json"],
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        return None, "compare failed: " + (p.stderr.strip() or p.stdout.strip())
    return json.loads(p.stdout)["divergent_step"], None


def layer_ratios(label, rows):
    """(parts in model order, logged steps, ratios[part][step]) from metrics.jsonl's layers."""
    logged = [r for r in rows if r.get("layers")]
    if not logged:
        sys.exit(f"plot_runs.py: {label}: metrics.jsonl has no per-layer norms (\"layers\"); "
                 "they are logged by titan-train from the release that added TensorBoard")
    parts = list(logged[0]["layers"].keys())
    steps = [r["step"] for r in logged]
    ratios = [[as_float(r["layers"].get(p, {}).get("update_ratio")) for r in logged]
              for p in parts]
    return parts, steps, ratios


def plot_layers(plt, runs, output):
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3 + 2.5 * len(runs)), squeeze=False)
    for ax, (label, rows) in zip(axes[:, 0], runs):
        parts, steps, ratios = layer_ratios(label, rows)
        logs = [[math.log10(v) if v > 0 else math.nan for v in row] for row in ratios]
        image = ax.imshow(logs, aspect="auto", interpolation="nearest", cmap="viridis")
        ax.set_yticks(range(len(parts)))
        names = [f"layers.{p}" if p.isdigit() else p for p in parts]
        ax.set_yticklabels(names)
        ticks = list(range(0, len(steps), max(1, len(steps) // 10)))
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(steps[i]) for i in ticks])
        ax.set_xlabel("step")
        ax.set_title(f"{label}: log10(update / weight) by part")
        fig.colorbar(image, ax=ax)
        value, i, j = max((v, i, j) for i, row in enumerate(ratios) for j, v in enumerate(row)
                          if not math.isnan(v))
        ax.plot([j], [i], marker="s", markersize=12, markerfacecolor="none", color="red")
        print(f"{label}: {len(parts)} parts x {len(steps)} steps; largest update/weight "
              f"{value:.3g} in {names[i]} at step {steps[j]}")
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    print(f"wrote {output}")


def read_precision(run, step):
    path = os.path.join(run_folder(run), "precision", f"step{step}.json")
    if not os.path.isfile(path):
        sys.exit(f"plot_runs.py: {path}: no precision report (run with "
                 f"--debug.precision_steps {step})")
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            sys.exit(f"plot_runs.py: {path}: not JSON ({e.msg})")


def plot_precision(plt, run, step, output):
    report = read_precision(run, step)
    ops = [op for op in report["ops"] if op["micro_batch"] == 0]
    if not ops:
        sys.exit(f"plot_runs.py: {run}: the step {step} report lists no ops")
    fig, ax = plt.subplots(figsize=(max(8, 0.12 * len(ops)), 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    values = [max(as_float(op["added_rel_error"]), 1e-12) for op in ops]
    ax.bar(range(len(ops)), values, color=[colors[op["block"] % len(colors)] for op in ops])
    ax.set_yscale("log")
    starts = [i for i, op in enumerate(ops) if i == 0 or op["block"] != ops[i - 1]["block"]]
    for i in starts[1:]:
        ax.axvline(i - 0.5, color="grey", linewidth=0.5)
    ax.set_xticks(starts)
    ax.set_xticklabels([f"layers.{ops[i]['block']}" for i in starts], rotation=45, ha="right")
    worst = report.get("worst_op")
    label = "no op"
    if worst:
        label = f"layers.{worst['block']} #{worst['index']} {worst['name']}"
        for i, op in enumerate(ops):
            if (op["block"], op["index"], op["name"]) == (worst["block"], worst["index"],
                                                           worst["name"]):
                ax.bar([i], [values[i]], color="red")
                ax.annotate(label, (i, values[i]), textcoords="offset points", xytext=(0, 5),
                            ha="center", color="red")
    ax.set_ylabel(f"added error against {report['reference']} (max relative)")
    ax.set_title(f"{os.path.basename(os.path.normpath(run_folder(run)))} step {step} "
                 f"({report['dtype']}): added error by op")
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    if worst:
        print(f"worst op: {label} adds {as_float(worst['added_rel_error']):.3g}")
    print(f"wrote {output}")


def default_binary():
    built = os.path.join(HERE, "..", "build", "titan-train")
    return built if os.path.exists(built) else shutil.which("titan-train")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", metavar="RUN")
    parser.add_argument("-o", "--output", required=True, help="PNG file to write")
    parser.add_argument("--titan-train", default=default_binary(), help="binary for compare")
    parser.add_argument("--layers", action="store_true",
                        help="the per-layer view: update/weight by part against step")
    parser.add_argument("--precision", nargs=2, metavar=("RUN", "STEP"),
                        help="a precision step's added error by op (debug.precision_steps)")
    args = parser.parse_args()
    if args.precision:
        if args.runs or args.layers:
            parser.error("--precision takes its one RUN and STEP, and no other runs or --layers")
        if not args.precision[1].isdigit():
            parser.error(f"--precision: STEP must be a step number, not {args.precision[1]!r}")
        plot_precision(import_pyplot(), args.precision[0], int(args.precision[1]), args.output)
        return
    if not args.runs:
        parser.error("give at least one RUN (or --precision RUN STEP)")
    plt = import_pyplot()
    runs = [(os.path.basename(os.path.normpath(run_folder(r))), read_metrics(r)) for r in args.runs]
    if args.layers:
        plot_layers(plt, runs, args.output)
        return

    fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for (label, rows) in runs:
        steps = [r["step"] for r in rows]
        for ax, key in zip(axes, ("loss", "grad_norm", "lr")):
            ax.plot(steps, [as_float(r[key]) for r in rows], marker=".", label=label)
    for ax, key in zip(axes, ("loss", "grad_norm", "lr")):
        ax.set_ylabel(key)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("step")
    title = "titan-train: " + " vs ".join(label for label, _ in runs)
    if len(args.runs) == 2:
        step, why = divergent_step(args.titan_train, args.runs[0], args.runs[1])
        if why:
            print(f"plot_runs.py: {why}", file=sys.stderr)
        elif step is None:
            title += " (bitwise identical)"
            print("runs are bitwise identical")
        else:
            title += f" (first divergent step: {step})"
            print(f"first divergent step: {step}")
            for ax in axes:
                ax.axvline(step, color="red", linestyle="--", linewidth=1,
                           label=f"first divergent step {step}")
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

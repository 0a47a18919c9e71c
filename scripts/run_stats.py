#!/usr/bin/env python3
"""Summarizes a titan-train metrics.jsonl for scripts/gpu_check.sh, as shell assignments.

usage: run_stats.py METRICS_JSONL [WARMUP_STEPS]

Prints first_loss, last_loss, steps, and over the steps after WARMUP_STEPS (default 3; all steps
when there are no more) the medians of tps, tflops, mfu_pct and step_time_s, and the largest
memory_gib (peak memory of the whole run). A missing or empty file prints steps=0.
"""
import json
import statistics
import sys


def main():
    path = sys.argv[1]
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        rows = []
    if not rows:
        print("steps=0")
        return
    steady = [r for r in rows if r["step"] > warmup] or rows

    def median(key):
        values = [float(r[key]) for r in steady]
        return statistics.median(values)

    out = {
        "steps": rows[-1]["step"],
        "first_loss": f"{float(rows[0]['loss']):.4f}",
        "last_loss": f"{float(rows[-1]['loss']):.4f}",
        "tps": f"{median('tps'):.0f}",
        "tflops": f"{median('tflops'):.2f}",
        "mfu": f"{median('mfu_pct'):.2f}",
        "step_s": f"{median('step_time_s'):.4f}",
        "memory_gib": f"{max(float(r['memory_gib']) for r in rows):.2f}",
        "memory_pct": f"{max(float(r['memory_pct']) for r in rows):.2f}",
    }
    for key, value in out.items():
        print(f"{key}={value}")


if __name__ == "__main__":
    main()

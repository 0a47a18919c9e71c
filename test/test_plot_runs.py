#!/usr/bin/env python3
"""scripts/plot_runs.py: writes a PNG for two runs marking their first divergent step, and says
how to install matplotlib when it is missing. Exits 77 (ctest: skipped, shown as such) when
python3-matplotlib is not installed, after checking the missing-matplotlib message.

Usage: test_plot_runs.py TITAN_TRAIN SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

binary, source = sys.argv[1], sys.argv[2]
script = os.path.join(source, "scripts", "plot_runs.py")
tmp = tempfile.mkdtemp(prefix="titan_plot_")
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def train(name, *extra):
    folder = os.path.join(tmp, name)
    subprocess.run([binary, "--model.flavor", "tiny", "--training.seq_len", "32",
                    "--training.local_batch_size", "2", "--training.steps", "6",
                    "--training.device", "cpu", "--lr_scheduler.warmup_steps", "1",
                    "--metrics.log_freq", "1", "--debug.seed", "3", "--job.dump_folder", folder,
                    *extra], check=True, stdout=subprocess.DEVNULL)
    return folder


a = train("baseline")
b = train("decay_half", "--lr_scheduler.decay_ratio", "0.5")  # lr differs from step 3 on

# Without matplotlib (shadowed by a package that fails to import): a hint and a non-zero exit.
shadow = os.path.join(tmp, "shadow", "matplotlib")
os.makedirs(shadow)
with open(os.path.join(shadow, "__init__.py"), "w") as f:
    f.write("raise ImportError('hidden for the test')\n")
env = dict(os.environ, PYTHONPATH=os.path.dirname(shadow))
p = subprocess.run([sys.executable, script, a, b, "-o", os.path.join(tmp, "x.png")],
                   capture_output=True, text=True, env=env)
check(p.returncode != 0 and "apt-get install python3-matplotlib" in p.stderr,
      "without matplotlib: non-zero exit and the install command (" + p.stderr.strip() + ")")

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIPPED: python3-matplotlib is not installed (apt-get install python3-matplotlib); "
          "the PNG was not checked")
    sys.exit(77 if not failures else 1)

png = os.path.join(tmp, "runs.png")
p = subprocess.run([sys.executable, script, a, b, "-o", png, "--titan-train", binary],
                   capture_output=True, text=True)
print(p.stdout + p.stderr)
check(p.returncode == 0, "plot_runs.py exits 0")
check("first divergent step: 3" in p.stdout, "the first divergent step (3) is marked")
with open(png, "rb") as f:
    head = f.read(8)
check(head == b"\x89PNG\r\n\x1a\n", "the output is a PNG")
import matplotlib.image  # noqa: E402
image = matplotlib.image.imread(png)
check(image.shape[0] >= 600 and image.shape[1] >= 600, f"the PNG is {image.shape[1]}x{image.shape[0]}")
# Some pixels are pure-ish red: the divergence marker (matplotlib's default curves are blue and
# orange).
red = ((image[..., 0] > 0.9) & (image[..., 1] < 0.2) & (image[..., 2] < 0.2)).sum()
check(red > 100, f"the red divergence line is drawn ({red} red pixels)")

# The per-layer view: one heatmap per run, its largest update/weight named from metrics.jsonl.
layers_png = os.path.join(tmp, "layers.png")
p = subprocess.run([sys.executable, script, a, "-o", layers_png, "--layers"],
                   capture_output=True, text=True)
print(p.stdout + p.stderr)
import json  # noqa: E402
with open(os.path.join(a, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
value, part, step = max((r["layers"][q]["update_ratio"], f"layers.{q}" if q.isdigit() else q,
                         r["step"]) for r in rows for q in r["layers"])
check(p.returncode == 0 and f"baseline: 5 parts x 6 steps; largest update/weight {value:.3g} in "
      f"{part} at step {step}" in p.stdout, "--layers names the largest update/weight cell")
check(matplotlib.image.imread(layers_png).shape[0] >= 300, "--layers writes a PNG")
old = os.path.join(tmp, "old.jsonl")
with open(old, "w") as f:
    f.write('{"step": 1, "loss": 8.0, "grad_norm": 1.0, "lr": 0.001}\n')
p = subprocess.run([sys.executable, script, old, "-o", layers_png, "--layers"],
                   capture_output=True, text=True)
check(p.returncode != 0 and "no per-layer norms" in p.stderr,
      "--layers on a metrics.jsonl without layers says so (" + p.stderr.strip() + ")")
# --precision: the bar chart of a precision step's report, the worst op named.
probed = train("probed", "--debug.precision_steps", "2")
precision_png = os.path.join(tmp, "precision.png")
p = subprocess.run([sys.executable, script, "--precision", probed, "2", "-o", precision_png],
                   capture_output=True, text=True)
with open(os.path.join(probed, "precision", "step2.json")) as f:
    worst = json.load(f)["worst_op"]
check(p.returncode == 0 and
      f"worst op: layers.{worst['block']} #{worst['index']} {worst['name']}" in p.stdout,
      "--precision names the report's worst op (" + (p.stdout + p.stderr).strip() + ")")
check(matplotlib.image.imread(precision_png).shape[0] >= 300, "--precision writes a PNG")
p = subprocess.run([sys.executable, script, "--precision", probed, "5", "-o", precision_png],
                   capture_output=True, text=True)
check(p.returncode != 0 and "no precision report" in p.stderr and
      "--debug.precision_steps 5" in p.stderr,
      "--precision for a step without a report says how to make one (" + p.stderr.strip() + ")")
sys.exit(1 if failures else 0)

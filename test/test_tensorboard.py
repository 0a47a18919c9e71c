#!/usr/bin/env python3
"""TensorBoard event files read back by a reader independent of titan-train's writer: the TFRecord
framing and CRC-32C in Python, the Event, Summary and HistogramProto messages decoded by Google's
protobuf runtime (Debian's python3-protobuf) from descriptors with TensorBoard's field numbers.

Proves: every record is whole and its CRCs hold; the tags are torchtitan's (and layers/<part>/*);
each scalar is metrics.jsonl's value at float32; steps are in order; the per-layer norms agree
with norms computed from consecutive checkpoints' weights (update = ||w_s - w_(s-1)||); the
histograms count every weight of their part; a run killed with SIGKILL leaves whole records, and
its resumed run continues in the same folder with each step once.

Exits 77 (ctest: skipped) without python3-protobuf or numpy.
Usage: test_tensorboard.py TITAN_TRAIN SOURCE_DIR
"""
import glob
import json
import math
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:
    print(f"SKIPPED: {e} (apt-get install python3-protobuf python3-numpy)")
    sys.exit(77)

binary = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="titan_tb_")
failures = []

TORCHTITAN_TAGS = {
    "loss_metrics/global_avg_loss": "loss", "loss_metrics/global_max_loss": "max_loss",
    "grad_norm": "grad_norm", "throughput(tps)": "tps", "tflops": "tflops", "mfu(%)": "mfu_pct",
    "memory/max_reserved(GiB)": "memory_gib", "memory/max_reserved(%)": "memory_pct",
    "time_metrics/end_to_end(s)": "step_time_s", "lr": "lr", "n_tokens_seen": "tokens_seen",
}
NORMS = ("grad_norm", "weight_norm", "update_norm", "update_ratio")


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


# --- the reader -------------------------------------------------------------------------------

def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="titan_tb_test.proto", package="titantest",
                                           syntax="proto3")

    def message(name, fields):
        m = f.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            d = m.field.add(name=field_name, number=number, type=kind,
                            label=T.LABEL_REPEATED if repeated else T.LABEL_OPTIONAL)
            if type_name:
                d.type_name = ".titantest." + type_name

    message("HistogramProto", [("min", 1, T.TYPE_DOUBLE, False, None),
                               ("max", 2, T.TYPE_DOUBLE, False, None),
                               ("num", 3, T.TYPE_DOUBLE, False, None),
                               ("sum", 4, T.TYPE_DOUBLE, False, None),
                               ("sum_squares", 5, T.TYPE_DOUBLE, False, None),
                               ("bucket_limit", 6, T.TYPE_DOUBLE, True, None),
                               ("bucket", 7, T.TYPE_DOUBLE, True, None)])
    message("Value", [("tag", 1, T.TYPE_STRING, False, None),
                      ("simple_value", 2, T.TYPE_FLOAT, False, None),
                      ("histo", 5, T.TYPE_MESSAGE, False, "HistogramProto")])
    message("Summary", [("value", 1, T.TYPE_MESSAGE, True, "Value")])
    message("Event", [("wall_time", 1, T.TYPE_DOUBLE, False, None),
                      ("step", 2, T.TYPE_INT64, False, None),
                      ("file_version", 3, T.TYPE_STRING, False, None),
                      ("summary", 5, T.TYPE_MESSAGE, False, "Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("titantest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


Event = event_class()


def read_events(path):
    """Every Event of `path`; fails the test on a record cut short or a CRC that does not hold."""
    data = open(path, "rb").read()
    events, at = [], 0
    while at < len(data):
        if len(data) - at < 12:
            check(False, f"{path}: a record header cut short at byte {at}")
            break
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        if masked(crc32c(data[at:at + 8])) != length_crc:
            check(False, f"{path}: the length CRC at byte {at}")
            break
        end = at + 12 + length + 4
        if end > len(data):
            check(False, f"{path}: a record cut short at byte {at}")
            break
        payload = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        if masked(crc32c(payload)) != data_crc:
            check(False, f"{path}: the data CRC at byte {at}")
            break
        event = Event()
        event.ParseFromString(payload)
        events.append(event)
        at = end
    return events


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


# --- running titan-train ----------------------------------------------------------------------

def command(folder, steps, *extra):
    return [binary, "--model.flavor", "tiny", "--training.seq_len", "32",
            "--training.local_batch_size", "2", "--training.steps", str(steps),
            "--lr_scheduler.warmup_steps", "2", "--debug.seed", "5", "--job.dump_folder", folder,
            "--metrics.enable_tensorboard", "true", *extra]


def metrics_rows(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return {row["step"]: row for row in map(json.loads, f)}


def event_files(folder):
    return sorted(glob.glob(os.path.join(folder, "tb", "*", "events.out.tfevents.*")))


def safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] != "F32":
            check(False, f"{path}: {name} is float32")
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<f4").astype(np.float64)
    return out


def part_of(name):
    parts = name.split(".")
    return parts[1] if parts[0] == "layers" else parts[0]


def by_part(weights):
    grouped = {}
    for name, w in weights.items():
        grouped.setdefault(part_of(name), []).append(w)
    return {p: np.concatenate(ws) for p, ws in grouped.items()}


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


# --- 1. scalars, per-layer norms and histograms against metrics.jsonl and checkpoints ---------

run = os.path.join(tmp, "run")
first_run = subprocess.run(command(run, 8, "--metrics.log_freq", "2", "--metrics.histogram_freq", "4",
                                   "--checkpoint.enable", "true", "--checkpoint.interval", "1",
                                   "--checkpoint.keep_latest_k", "0"),
                           capture_output=True, text=True)
if first_run.returncode != 0:
    sys.exit(f"the run failed ({first_run.returncode}):\n{first_run.stdout}{first_run.stderr}")
# The fused AdamW measures its own update in float64; torch's AdamW leaves it to a float32
# reduction of a copy, about 1e-6 relative at these sizes.
fused_adamw = "AdamW fused_" in first_run.stdout
norm_tolerance = 1e-10 if fused_adamw else 1e-5
files = event_files(run)
check(len(files) == 1, f"one event file under tb/<YYYYmmdd-HHMM>/ ({files})")
minute = os.path.basename(os.path.dirname(files[0]))
check(len(minute) == 13 and minute[8] == "-" and (minute[:8] + minute[9:]).isdigit(),
      f"the run folder is named YYYYmmdd-HHMM ({minute})")
check(os.path.basename(files[0]).split(".")[3].isdigit(),
      "the file is events.out.tfevents.<unix time>.<host>")
events = read_events(files[0])
check(events[0].file_version == "brain.Event:2", "the first record is the file_version event")
rows = metrics_rows(run)
parts = list(rows[1]["layers"].keys())
check(parts[0] == "tok_embeddings" and parts[-2:] == ["norm", "output"] and "0" in parts,
      f"metrics.jsonl's layers hold the embedding, each block, norm and output ({parts})")

scalar_events = [e for e in events[1:] if e.summary.value and e.summary.value[0].HasField("histo") is False]
histogram_events = [e for e in events[1:] if e.summary.value and e.summary.value[0].HasField("histo")]
check([e.step for e in scalar_events] == sorted(rows), f"scalar steps {[e.step for e in scalar_events]} are "
      f"metrics.jsonl's, in order")
check([e.step for e in histogram_events] == [4, 8], "histograms at steps 4 and 8")
expected_tags = set(TORCHTITAN_TAGS) | {f"layers/{p}/{n}" for p in parts for n in NORMS}
for e in scalar_events:
    row = rows[e.step]
    values = {v.tag: v.simple_value for v in e.summary.value}
    check(set(values) == expected_tags, f"step {e.step}: the tags are torchtitan's and the layers'")
    wrong = [t for t, key in TORCHTITAN_TAGS.items() if values.get(t) != f32(row[key])]
    wrong += [f"layers/{p}/{n}" for p in parts for n in NORMS
              if values.get(f"layers/{p}/{n}") != f32(row["layers"][p][n])]
    check(not wrong, f"step {e.step}: every scalar is metrics.jsonl's at float32 (differ: {wrong})")

checkpoint = os.path.join(run, "checkpoint")
weights = {s: by_part(safetensors(os.path.join(checkpoint, f"step-{s}", "model.safetensors")))
           for s in range(1, 9)}
for s in (2, 4, 6, 8):
    for p in parts:
        logged = rows[s]["layers"][p]
        update = float(np.linalg.norm((weights[s][p] - weights[s - 1][p]).astype(np.float64)))
        weight = float(np.linalg.norm(weights[s][p].astype(np.float64)))
        if not (close(logged["update_norm"], update, norm_tolerance)
                and close(logged["weight_norm"], weight, norm_tolerance)):
            check(False, f"step {s} {p}: update_norm {logged['update_norm']} vs {update} from the "
                  f"checkpoints, weight_norm {logged['weight_norm']} vs {weight}")
            break
    else:
        check(True, f"step {s}: every part's update norm is ||w_{s} - w_{s - 1}|| and its weight "
              f"norm ||w_{s}|| of the checkpoints, within {norm_tolerance:g} relative")
    total = math.sqrt(sum(rows[s]["layers"][p]["grad_norm"] ** 2 for p in parts))
    check(close(total, rows[s]["grad_norm"], 1e-5),
          f"step {s}: the parts' gradient norms make up grad_norm ({total} vs {rows[s]['grad_norm']})")

for e in histogram_events:
    histos = {v.tag: v.histo for v in e.summary.value}
    check(set(histos) == {f"layers/{p}/{kind}" for p in parts for kind in ("weights", "grads")},
          f"step {e.step}: a weights and a grads histogram for every part")
    for p in parts:
        h, w = histos[f"layers/{p}/weights"], weights[e.step][p]
        counts = [np.count_nonzero((w <= limit) & (w > (h.bucket_limit[i - 1] if i else -np.inf)))
                  for i, limit in enumerate(h.bucket_limit)]
        ok = (h.num == w.size and sum(h.bucket) == w.size and h.min == w.min() and h.max == w.max()
              and close(h.sum, w.sum(), 1e-9) and list(h.bucket) == counts)
        if not ok:
            check(False, f"step {e.step} {p}: the weights histogram counts the checkpoint's weights")
            break
    else:
        check(True, f"step {e.step}: each weights histogram counts its part's checkpoint weights, "
              "bucket by bucket")

# --- 2. killed with SIGKILL, then resumed -----------------------------------------------------

killed = os.path.join(tmp, "killed")
p = subprocess.Popen(command(killed, 100000, "--metrics.log_freq", "1", "--metrics.histogram_freq", "3",
                             "--checkpoint.enable", "true", "--checkpoint.interval", "10"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# The run is paused (SIGSTOP) to look at it, and killed only once it has logged steps after
# its last checkpoint, so that the resumed run has steps to repeat whatever the machine's speed.
def logged_after_checkpoint():
    files = event_files(killed)
    if not files or not os.path.isdir(os.path.join(killed, "checkpoint")):
        return False
    steps = [e.step for e in read_events(files[0])[1:] if not e.summary.value[0].HasField("histo")]
    saved = [int(n[5:]) for n in os.listdir(os.path.join(killed, "checkpoint"))
             if n.startswith("step-") and n[5:].isdigit()]
    return len(steps) >= 12 and saved and max(steps) > max(saved)


deadline = time.time() + 60
while time.time() < deadline:
    time.sleep(0.05)
    os.kill(p.pid, signal.SIGSTOP)
    if logged_after_checkpoint():
        break
    os.kill(p.pid, signal.SIGCONT)
os.kill(p.pid, signal.SIGKILL)
p.wait()
before = event_files(killed)
events = read_events(before[0])
logged = [e.step for e in events[1:] if not e.summary.value[0].HasField("histo")]
check(len(before) == 1 and len(logged) >= 12, f"after SIGKILL every record is whole ({len(logged)} "
      "logged steps read to the end of the file)")
checkpoints = [int(name[5:]) for name in os.listdir(os.path.join(killed, "checkpoint"))
               if name.startswith("step-")]
check(max(logged) > max(checkpoints), f"the killed run logged steps after its last checkpoint "
      f"(step {max(checkpoints)}): the resumed run repeats them")
resumed = subprocess.run(command(killed, 60, "--metrics.log_freq", "1", "--metrics.histogram_freq", "3",
                                 "--checkpoint.enable", "true", "--checkpoint.interval", "10"),
                         capture_output=True, text=True)
check(resumed.returncode == 0, "the resumed run ends with 0 " + resumed.stderr[-300:])
after = event_files(killed)
check(len(after) == 2 and os.path.dirname(after[0]) == os.path.dirname(after[1]),
      f"the resumed run writes a new event file beside the first ({after})")
steps = [e.step for f in after for e in read_events(f)[1:] if not e.summary.value[0].HasField("histo")]
check(steps == list(range(1, 61)), f"read in file order, the two files give steps 1-60 once each ({steps})")
rows = metrics_rows(killed)
last = [e for e in read_events(after[-1]) if e.step == 60 and not e.summary.value[0].HasField("histo")]
check(len(last) == 1 and {v.tag: v.simple_value for v in last[0].summary.value}[
    "loss_metrics/global_avg_loss"] == f32(rows[60]["loss"]), "the resumed run's step 60 loss is metrics.jsonl's")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)

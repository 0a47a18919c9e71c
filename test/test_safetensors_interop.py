"""safetensors with PyTorch: titan-train starts from weights Python wrote, and Python loads what
titan-train exports.

1. A plain PyTorch Llama (scripts/reference/llama_reference.py, shaped like the "tiny" flavor)
   with fresh weights is written as model.safetensors by this script (the format directly:
   Debian bookworm has no python3-safetensors), with a token shard of one batch.
2. titan-train trains one step from those weights (checkpoint.initial_load_path) on that batch:
   its step-1 loss (fingerprint.log, exact) must equal the one PyTorch computes within 1e-5
   relative.
3. `titan-train export` of the run's checkpoint: every tensor read back here is bitwise equal
   to the checkpoint's own model.safetensors, the file loads into the PyTorch Llama with
   load_state_dict(strict=True), and --dtype bfloat16 equals the float32 weights rounded.

Usage: test_safetensors_interop.py TITAN_TRAIN_BINARY SOURCE_DIR. Exits 77 (skipped, with a
message) without python3-torch.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: python3-torch is not installed (apt-get install python3-torch)")
    sys.exit(77)

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "I64": torch.int64}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        t = t.detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        data = bytearray(raw[8 + n + begin:8 + n + end])
        dtype = DTYPES[e["dtype"]]
        if dtype == torch.bfloat16:  # no numpy bfloat16: go through int16
            t = torch.frombuffer(data, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(data, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def run(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: titan-train %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def main():
    binary, source = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(source, "scripts", "reference"))
    import llama_reference as ref

    torch.set_num_threads(1)
    cfg = dict(ref.CFG, vocab_size=512, multiple_of=64, seq_len=16, batch_size=2)
    torch.manual_seed(4242)
    model = ref.Transformer(cfg)
    model.init_weights()
    tmp = tempfile.mkdtemp(prefix="titan_safetensors_")
    weights = os.path.join(tmp, "model.safetensors")
    write_safetensors(weights, dict(model.named_parameters()))

    window = cfg["seq_len"] + 1
    g = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, cfg["vocab_size"], (cfg["batch_size"] * window,), generator=g)
    shard = os.path.join(tmp, "tokens.bin")
    tokens.to(torch.int32).numpy().astype("<u4").tofile(shard)
    batch = tokens.view(cfg["batch_size"], window)
    with torch.no_grad():
        expected = ref.loss_fn(model(batch[:, :-1]), batch[:, 1:]).item()

    dump = os.path.join(tmp, "run")
    out = run(binary, "--model.flavor", "tiny", "--training.seq_len", "16", "--training.local_batch_size", "2",
              "--training.steps", "1", "--training.device", "cpu", "--training.dataset", "tokens",
              "--training.dataset_path", shard, "--training.dataset_token_dtype", "uint32",
              "--activation_checkpoint.mode", "none", "--checkpoint.enable", "--job.dump_folder", dump,
              "--checkpoint.initial_load_path", weights)
    if "initial weights from " + weights not in out:
        sys.exit("FAILED: the log does not name the initial weights:\n" + out)
    with open(os.path.join(dump, "fingerprint.log")) as f:
        step1 = next(line for line in f if line.startswith("step 1 "))
    got = float.fromhex(step1.split()[3])
    rel = abs(got - expected) / abs(expected)
    print("step-1 loss: titan-train %r, PyTorch %r, relative difference %.3g" % (got, expected, rel))
    if not rel <= 1e-5:
        sys.exit("FAILED: the losses differ by more than 1e-5 relative")

    checkpoint = os.path.join(dump, "checkpoint", "step-1")
    saved = read_safetensors(os.path.join(checkpoint, "model.safetensors"))
    for dtype in ("float32", "bfloat16"):
        exported = os.path.join(tmp, dtype + ".safetensors")
        run(binary, "export", checkpoint, "-o", exported, "--dtype", dtype)
        back = read_safetensors(exported)
        if sorted(back) != sorted(saved):
            sys.exit("FAILED: %s export holds %s" % (dtype, sorted(back)))
        for name, t in saved.items():
            want = t if dtype == "float32" else t.to(torch.bfloat16)
            if back[name].dtype != want.dtype or not torch.equal(back[name], want):
                sys.exit("FAILED: %s export of %s differs from the checkpoint" % (dtype, name))
        ref.Transformer(cfg).load_state_dict({k: v.float() for k, v in back.items()}, strict=True)
    print("export: float32 bitwise, bfloat16 exact, load_state_dict(strict=True) accepts both")


if __name__ == "__main__":
    main()

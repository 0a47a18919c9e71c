"""A Llama in Hugging Face transformers' conventions, the reference for titan-train's HF import.

What it is for: titan-train loads Hugging Face Llama checkpoints (lib/checkpoint/hf_*.h),
renaming tensors and permuting the q/k rows from transformers' rotate-half RoPE layout to its
own interleaved one. This script is an independent PyTorch implementation that computes in
transformers' layout (LlamaForCausalLM's names, rotate-half RoPE on the stored q/k rows,
llama3 frequency scaling, eager attention): if titan-train's import permuted or renamed
anything wrongly, its logits would part from these. It never uses titan-train's layout.

generate (scripts/reference/generate.sh runs it) writes, with one thread and fixed seeds:
  test/data/hf_tiny/                a tied, bf16, sharded Hugging Face checkpoint of titan-train's
                                    "tiny" flavor: config.json, model.safetensors.index.json and
                                    model-0000K-of-0000N.safetensors
  test/data/hf_llama_reference.bin  the batch and the logits and loss this model computes from
                                    the files just written (format: llama_reference.py's TITNREF1)
  test/data/hf_reference_run/       fingerprint.log and numerics.log of that forward and
                                    backward in titan-train's formats (lib/metrics), so that
                                    `titan-train compare RUN test/data/hf_reference_run
                                    --tolerance R` names the first block output or gradient
                                    where a titan-train run on the same weights and batch parts
                                    from this model

The files are written in the form titan-train's writer gives (safetensors header in its order,
config.json as json.dumps(indent=2, sort_keys=True), shards filled in order up to
SHARD_BYTES), so that titan-train reading and writing them again must give the same bytes.

numerics.log: the checksum field is 0 on every line. titan-train's checksum hashes the bits,
and two implementations of the same function round differently, so bits never match across
them; compare --tolerance compares the mean and max_abs instead. Gradients are those of
titan-train's parameters: lm_head is a copy of embed_tokens that gets its own gradient (titan-train
keeps output.weight apart from tok_embeddings.weight after importing tied weights), and
the statistics of q/k gradients do not depend on the row order.

Other modes: --check DIR reads an HF folder (any written in this form, e.g. by
`titan-train export --hf`) and prints its logits for the stored batch against the stored ones.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_reference import MAGIC, VERSION, read_file, record  # noqa: E402  (TITNREF1 format)

# titan-train's "tiny" flavor (lib/model/model_args.cpp) as a LlamaConfig: dim 64, 2 layers,
# 4 heads, 2 kv heads, vocab 512, FFN int(2 * 4 * 64 / 3) = 170 rounded up to 64 -> 192, Llama 3.1
# RoPE scaling with torchtitan's defaults; max_position_embeddings is the flavor's max_seq_len.
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
    "intermediate_size": 192, "max_position_embeddings": 2048, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
    "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 512,
}
SHARD_BYTES = 100000
SEED, DATA_SEED, BATCH, SEQ = 2024, 11, 2, 16
DTYPES = {"F32": (torch.float32, torch.float32), "BF16": (torch.bfloat16, torch.int16),
          "F16": (torch.float16, torch.int16)}


def layer_names(i):
    p = "model.layers.%d." % i
    return [p + n for n in ("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                            "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                            "mlp.gate_proj.weight", "mlp.down_proj.weight", "mlp.up_proj.weight",
                            "input_layernorm.weight", "post_attention_layernorm.weight")]


def hf_names(c):
    """Every tensor of the checkpoint, in the order the files hold them."""
    names = ["model.embed_tokens.weight"]
    for i in range(c["num_hidden_layers"]):
        names += layer_names(i)
    names.append("model.norm.weight")
    if not c["tie_word_embeddings"]:
        names.append("lm_head.weight")
    return names


def random_weights(c):
    """Weights with a spread of scales, so that every op matters to the logits."""
    torch.manual_seed(SEED)
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shapes = {"model.embed_tokens.weight": (c["vocab_size"], d), "model.norm.weight": (d,),
              "lm_head.weight": (c["vocab_size"], d)}
    for i in range(c["num_hidden_layers"]):
        qn, kn, vn, on, gn, dn, un, ln1, ln2 = layer_names(i)
        shapes.update({qn: (q, d), kn: (kv, d), vn: (kv, d), on: (d, q), gn: (f, d), dn: (d, f),
                       un: (f, d), ln1: (d,), ln2: (d,)})
    w = {}
    for name in hf_names(c):
        shape = shapes[name]
        if len(shape) == 1:
            w[name] = 1 + 0.1 * torch.randn(shape)
        else:
            w[name] = torch.randn(shape) / math.sqrt(shape[1])
    return {n: t.to(torch.bfloat16) for n, t in w.items()}


# ---- files ----------------------------------------------------------------------------------

def safetensors_bytes(tensors):
    """A safetensors file in titan-train's header form: __metadata__ first, tensors in order."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, t in tensors:
        code = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[t.dtype]
        blob = t.contiguous().view(DTYPES[code][1]).numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs)


def parse_safetensors(buf):
    (n,) = struct.unpack_from("<Q", buf, 0)
    header, out = json.loads(buf[8:8 + n]), {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype, raw = DTYPES[e["dtype"]]
        b, end = e["data_offsets"]
        data = bytearray(buf[8 + n + b:8 + n + end])
        out[name] = torch.frombuffer(data, dtype=raw).view(dtype).reshape(e["shape"]).clone()
    return out


def write_hf_folder(folder, c, weights):
    os.makedirs(folder, exist_ok=True)
    names = hf_names(c)
    shards, size = [[]], 0
    for name in names:  # filled in order; a shard closes when the next tensor would overflow it
        nbytes = weights[name].numel() * weights[name].element_size()
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        with open(os.path.join(folder, file), "wb") as out:
            out.write(safetensors_bytes([(n, weights[n]) for n in shard]))
        for n in shard:
            weight_map[n] = file
            total += weights[n].numel() * weights[n].element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as out:
        out.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    with open(os.path.join(folder, "config.json"), "w") as out:
        out.write(json.dumps(c, indent=2, sort_keys=True) + "\n")


def read_hf_folder(folder):
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    weights = {}
    for file in files:
        with open(os.path.join(folder, file), "rb") as f:
            weights.update(parse_safetensors(f.read()))
    return c, weights


# ---- the model, in transformers' conventions ------------------------------------------------

def rms_norm(x, weight, eps):  # in float32, then the weight times the input dtype's value
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def inverse_frequencies(c):
    hd = c["head_dim"]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    s = c.get("rope_scaling")
    if not s:
        return inv
    assert s["rope_type"] == "llama3"
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / s["factor"], inv)  # long waves: slowed
    smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
    blended = (1 - smooth) * scaled / s["factor"] + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled)


def cos_sin(c, seq):
    angles = torch.outer(torch.arange(seq).float(), inverse_frequencies(c))  # (T, hd/2)
    both = torch.cat((angles, angles), dim=-1)  # first and second half share a frequency
    return both.cos(), both.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(c, w, p, x, cos, sin):
    B, T, _ = x.shape
    H, K, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    q = (x @ w[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
    k = (x @ w[p + "self_attn.k_proj.weight"].T).view(B, T, K, hd).transpose(1, 2)
    v = (x @ w[p + "self_attn.v_proj.weight"].T).view(B, T, K, hd).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin  # (B, H, T, hd)
    k = k * cos + rotate_half(k) * sin
    rep = H // K  # key/value head j serves query heads j*rep .. j*rep+rep-1
    k = k[:, :, None].expand(B, K, rep, T, hd).reshape(B, H, T, hd)
    v = v[:, :, None].expand(B, K, rep, T, hd).reshape(B, H, T, hd)
    scores = (q @ k.transpose(2, 3)) * hd ** -0.5
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = (probs @ v).transpose(1, 2).reshape(B, T, H * hd)
    return out @ w[p + "self_attn.o_proj.weight"].T


def mlp(w, p, x):
    gate = F.silu(x @ w[p + "mlp.gate_proj.weight"].T)
    return (gate * (x @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T


def forward(c, w, tokens, stages=None):
    """Logits (B, T, V); `stages` collects (titan-train's stage name, output) in forward order."""
    keep = stages.append if stages is not None else (lambda _: None)
    eps = c["rms_norm_eps"]
    cos, sin = cos_sin(c, tokens.shape[1])
    h = w["model.embed_tokens.weight"][tokens]
    keep(("tok_embeddings", h))
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = h + attention(c, w, p, rms_norm(h, w[p + "input_layernorm.weight"], eps), cos, sin)
        h = h + mlp(w, p, rms_norm(h, w[p + "post_attention_layernorm.weight"], eps))
        keep(("layers.%d" % i, h))
    h = rms_norm(h, w["model.norm.weight"], eps)
    keep(("norm", h))
    logits = h @ w["lm_head.weight"].T
    keep(("output", logits))
    return logits


def float32_weights(c, weights):
    """The stored weights in float32, lm_head a copy of embed_tokens when tied."""
    w = {n: t.float() for n, t in weights.items()}
    if c.get("tie_word_embeddings") and "lm_head.weight" not in w:
        w["lm_head.weight"] = w["model.embed_tokens.weight"].clone()
    return w


def loss_fn(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1), reduction="sum") / targets.numel()


# ---- titan-train's log formats ---------------------------------------------------------------

TITAN_NAMES = {  # HF name -> titan-train's, for the gradient lines
    "self_attn.q_proj.weight": "attention.wq.weight", "self_attn.k_proj.weight": "attention.wk.weight",
    "self_attn.v_proj.weight": "attention.wv.weight", "self_attn.o_proj.weight": "attention.wo.weight",
    "mlp.gate_proj.weight": "feed_forward.w1.weight", "mlp.down_proj.weight": "feed_forward.w2.weight",
    "mlp.up_proj.weight": "feed_forward.w3.weight", "input_layernorm.weight": "attention_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
}


def titan_name(hf):
    fixed = {"model.embed_tokens.weight": "tok_embeddings.weight", "model.norm.weight": "norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    _, _, i, rest = hf.split(".", 3)
    return "layers.%s.%s" % (i, TITAN_NAMES[rest])


def stats_line(kind, name, t):
    """mean (float64 sum of the float32 values in order) and max_abs, as hex floats."""
    v = t.detach().float().flatten().tolist()
    mean = math.fsum(v) / len(v) if v else 0.0
    return "%s %s checksum %016x mean %s max_abs %s" % (kind, name, 0, mean.hex(),
                                                        max(abs(x) for x in v).hex())


def write_run(run_dir, c, w, tokens, targets):
    os.makedirs(run_dir, exist_ok=True)
    w = {n: t.clone().requires_grad_(True) for n, t in w.items()}
    stages = []
    loss = loss_fn(forward(c, w, tokens, stages), targets)
    loss.backward()
    titan_order = ["model.embed_tokens.weight"]
    for i in range(c["num_hidden_layers"]):  # titan-train's registration order in a block
        titan_order += [layer_names(i)[k] for k in (0, 1, 2, 3, 4, 5, 6, 7, 8)]
    titan_order += ["model.norm.weight", "lm_head.weight"]
    lines = ["# titan-train numerics v1: diff two of these to find where runs part", "level blocks",
             "freq 1", "step 1 micro 0"]
    lines += [stats_line("fwd", name, t) for name, t in stages]
    lines.append("step 1 grads")
    lines += [stats_line("grad", titan_name(n), w[n].grad) for n in reversed(titan_order)]
    lines.append("end step 1")
    with open(os.path.join(run_dir, "numerics.log"), "w") as out:
        out.write("\n".join(lines) + "\n")
    header = ["# titan-train fingerprint v1: diff two of these to compare runs bit for bit",
              "titan_train_version reference", "libtorch_version " + torch.__version__.split("+")[0],
              'device cpu "reference"', "config_hash 0000000000000000", "seed %d" % SEED,
              "deterministic false", "deterministic_warn_only false",
              "cudnn_deterministic false cudnn_benchmark false", "cublas_workspace_config unset",
              "cpu_threads 1", "world_size 1"]
    value = loss.item()
    step = "step 1 loss %s (%.9g) grad_norm %s (0) lr %s tokens %d" % (
        value.hex(), value, (0.0).hex(), (0.0).hex(), tokens.numel())
    with open(os.path.join(run_dir, "fingerprint.log"), "w") as out:
        out.write("\n".join(header + [step]) + "\n")


def batch(c):
    g = torch.Generator().manual_seed(DATA_SEED)
    tokens = torch.randint(0, c["vocab_size"], (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def generate(data_dir):
    c = dict(CONFIG)
    folder = os.path.join(data_dir, "hf_tiny")
    write_hf_folder(folder, c, random_weights(c))
    c, stored = read_hf_folder(folder)  # the reference computes from what the files hold
    w = float32_weights(c, stored)
    inputs, targets = batch(c)
    with torch.no_grad():
        logits = forward(c, w, inputs)
    loss = loss_fn(logits, targets)
    text = "flavor=tiny\nshard_bytes=%d\nseed=%d\ndata_seed=%d\ntorch_version=%s\n" % (
        SHARD_BYTES, SEED, DATA_SEED, torch.__version__)
    recs = [record("config", text), record("inputs", inputs), record("targets", targets),
            record("logits", logits.float()), record("loss", loss.float())]
    out = os.path.join(data_dir, "hf_llama_reference.bin")
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<II", VERSION, len(recs)) + b"".join(recs))
    write_run(os.path.join(data_dir, "hf_reference_run"), c, w, inputs, targets)
    print("wrote %s, %s (%d records; loss %.6f)" % (folder, out, len(recs), loss.item()))


def check(folder, reference):
    c, stored = read_hf_folder(folder)
    recs = read_file(reference)
    with torch.no_grad():
        logits = forward(c, float32_weights(c, stored), recs["inputs"])
    diff = (logits - recs["logits"]).abs().max().item() / recs["logits"].abs().max().item()
    print("%s: logits against %s: max relative difference %.3g" % (folder, reference, diff))
    return diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", help="write hf_tiny/, hf_llama_reference.bin, hf_reference_run/ here")
    ap.add_argument("--check", metavar="DIR", help="an HF folder to compute the stored batch's logits from")
    ap.add_argument("--reference", default="test/data/hf_llama_reference.bin")
    args = ap.parse_args()
    if not args.data_dir and not args.check:
        ap.error("give --data-dir DIR and/or --check DIR")
    torch.set_num_threads(1)  # deterministic, byte-identical output
    if args.data_dir:
        generate(args.data_dir)
    if args.check:
        sys.exit(0 if check(args.check, args.reference) <= 1e-5 else 1)


if __name__ == "__main__":
    main()

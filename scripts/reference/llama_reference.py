"""PyTorch reference for titan-train's Llama 3 model (parity test data).

What it is for: a C++ Catch2 parity test loads test/data/llama_reference.bin,
builds titan-train's Llama 3 model from the stored config, copies the stored
parameters (torchtitan's names) into it, and compares the logits, loss and
every gradient of one forward/backward, then the 10 AdamW step losses.

How to regenerate: scripts/reference/generate.sh (Debian's PyTorch at
/usr/bin/python3). Output is byte-identical across runs on the same PyTorch
build (one thread, fixed seeds). `--check FILE` parses a file back, lists its
records and re-checks the stored logits against the model.

Model: torchtitan's llama3 Transformer (RMSNorm, GQA attention, RoPE with Llama
3.1 scaling, SwiGLU, untied output), depth_init weights under manual_seed(1337);
then every RMSNorm weight is multiplied by (1 + 0.1 * randn), so the norm
weights are not all ones and the parity test exercises them.

Format (little-endian), version 1
    8 bytes magic b"TITNREF1", uint32 version (1), uint32 record count N, then
    N records: uint32 name length, name (utf-8), uint8 kind
      kind 0 (float32 tensor) / 1 (int64 tensor): uint32 ndim, ndim x int64
        dims, then the contiguous row-major data
      kind 2 (text): uint64 byte length, then utf-8 bytes
    Records in order: config (text, key=value lines; floats as repr), inputs,
    targets (int64 (B, T)), param/<name> (named_parameters() order), logits
    (B, T, vocab), loss (ndim 0), grad/<name> (same order), step_losses,
    step_grad_norms, step_lrs (float32 (steps,)).
"""
import argparse
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

# The config record, in this key order (ffn_dim_multiplier None, depth_init on).
CFG = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, multiple_of=32,
           norm_eps=1e-5, rope_theta=500000.0, rope_scaling_factor=8.0, rope_low_freq_factor=1.0,
           rope_high_freq_factor=4.0, rope_original_max_position=8192, seq_len=32, batch_size=2,
           lr=8e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, max_norm=1.0, steps=10,
           warmup_steps=2, decay_ratio=0.8, decay_type="linear", min_lr_factor=0.0, seed=1337)
DATA_SEED = 7
MAGIC, VERSION = b"TITNREF1", 1
KIND_F32, KIND_I64, KIND_TEXT = 0, 1, 2


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):  # normalise in float32, then scale by the weight
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_freqs_cis(head_dim, seq_len, c):
    freqs = 1.0 / (c["rope_theta"] ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    factor, low, high = c["rope_scaling_factor"], c["rope_low_freq_factor"], c["rope_high_freq_factor"]
    orig = c["rope_original_max_position"]
    wavelen = 2 * math.pi / freqs
    smooth = (orig / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * freqs / factor + smooth * freqs
    scaled = torch.where(wavelen > orig / low, freqs / factor, smoothed)
    freqs = torch.where(wavelen < orig / high, freqs, scaled)
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)  # (T, head_dim/2)


def apply_rope(x, freqs_cis):  # x: (B, T, H, hd); pairs (2i, 2i+1)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3).type_as(x)


def repeat_kv(x, n_rep):  # kv head j serves query heads j*n_rep .. j*n_rep+n_rep-1
    bs, slen, n_kv, hd = x.shape
    return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, hd).reshape(bs, slen, n_kv * n_rep, hd)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = c["n_heads"], c["n_kv_heads"], c["dim"] // c["n_heads"]
        self.wq = nn.Linear(c["dim"], self.n_heads * self.hd, bias=False)
        self.wk = nn.Linear(c["dim"], self.n_kv * self.hd, bias=False)
        self.wv = nn.Linear(c["dim"], self.n_kv * self.hd, bias=False)
        self.wo = nn.Linear(self.n_heads * self.hd, c["dim"], bias=False)

    def forward(self, x, freqs_cis):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.hd)
        k = self.wk(x).view(B, T, self.n_kv, self.hd)
        v = self.wv(x).view(B, T, self.n_kv, self.hd)
        q, k = apply_rope(q, freqs_cis), apply_rope(k, freqs_cis)
        rep = self.n_heads // self.n_kv
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        probs = F.softmax(scores.float(), dim=-1).type_as(q)
        return self.wo((probs @ v).transpose(1, 2).reshape(B, T, self.n_heads * self.hd))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, m = int(2 * 4 * c["dim"] / 3), c["multiple_of"]  # no ffn_dim_multiplier
        h = m * ((h + m - 1) // m)  # 170 -> 192
        self.w1 = nn.Linear(c["dim"], h, bias=False)
        self.w2 = nn.Linear(h, c["dim"], bias=False)
        self.w3 = nn.Linear(c["dim"], h, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id, c):
        super().__init__()
        self.attention = Attention(c)
        self.feed_forward = FeedForward(c)
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.init_std = 0.02 / (2 * (layer_id + 1)) ** 0.5  # depth_init

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))

    def init_weights(self):  # torchtitan order: wq, wk, wv, wo, then w1, w2, w3
        a, f, s = self.attention, self.feed_forward, self.init_std
        for lin, std in ((a.wq, 0.02), (a.wk, 0.02), (a.wv, 0.02), (a.wo, s), (f.w1, 0.02), (f.w2, s), (f.w3, s)):
            nn.init.trunc_normal_(lin.weight, mean=0.0, std=std, a=-2.0, b=2.0)


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.layers = nn.ModuleList(TransformerBlock(i, c) for i in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.output = nn.Linear(c["dim"], c["vocab_size"], bias=False)

    def init_weights(self):
        nn.init.normal_(self.tok_embeddings.weight, mean=0.0, std=1.0)
        for layer in self.layers:
            layer.init_weights()
        std = self.c["dim"] ** -0.5
        nn.init.trunc_normal_(self.output.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
        # Not in torchtitan: perturb the all-ones RMSNorm weights so the parity test exercises them.
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, RMSNorm):
                    m.weight.mul_(1 + 0.1 * torch.randn(m.weight.shape))

    def forward(self, tokens):
        freqs_cis = rope_freqs_cis(self.c["dim"] // self.c["n_heads"], tokens.shape[1], self.c)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:  # h += attention(attention_norm(h)); h += feed_forward(ffn_norm(h))
            h = layer(h, freqs_cis)
        return self.output(self.norm(h))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1), reduction="sum") / targets.numel()


def lr_factor(step, c):  # torchtitan warmup-stable-decay, step is 1-based
    steps, cur = c["steps"], step - 1
    warmup = min(c["warmup_steps"], steps)
    decay = min(round(steps * c["decay_ratio"]), steps - warmup)
    stable = steps + 1 - warmup - decay
    assert c["decay_type"] == "linear"
    if cur < warmup + stable:
        return (cur + 1) / warmup if cur < warmup else 1.0
    p = (cur + 1 - warmup - stable) / decay
    return c["min_lr_factor"] + (1 - c["min_lr_factor"]) * (1 - p)


def record(name, value):
    """One record: a str becomes text, a float32/int64 tensor its raw data."""
    head = struct.pack("<I", len(name.encode("utf-8"))) + name.encode("utf-8")
    if isinstance(value, str):
        return head + struct.pack("<BQ", KIND_TEXT, len(value.encode("utf-8"))) + value.encode("utf-8")
    t = value.detach().contiguous()
    kind, fmt = {torch.float32: (KIND_F32, "f"), torch.int64: (KIND_I64, "q")}[t.dtype]
    head += struct.pack("<BI%dq" % t.dim(), kind, t.dim(), *t.shape)
    return head + struct.pack("<%d%s" % (t.numel(), fmt), *t.flatten().tolist())


def read_file(path):
    """Parses a reference file into an ordered dict name -> tensor or str."""
    with open(path, "rb") as f:
        buf = f.read()
    assert buf[:8] == MAGIC, "bad magic"
    version, n = struct.unpack_from("<II", buf, 8)
    assert version == VERSION, "unsupported version %d" % version
    pos, out = 16, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", buf, pos)
        name, pos = buf[pos + 4:pos + 4 + ln].decode("utf-8"), pos + 4 + ln
        kind, pos = buf[pos], pos + 1
        if kind == KIND_TEXT:
            (blen,) = struct.unpack_from("<Q", buf, pos)
            out[name], pos = buf[pos + 8:pos + 8 + blen].decode("utf-8"), pos + 8 + blen
            continue
        (ndim,) = struct.unpack_from("<I", buf, pos)
        dims, pos = struct.unpack_from("<%dq" % ndim, buf, pos + 4), pos + 4 + 8 * ndim
        fmt, dtype, size = ("f", torch.float32, 4) if kind == KIND_F32 else ("q", torch.int64, 8)
        vals = struct.unpack_from("<%d%s" % (math.prod(dims), fmt), buf, pos)
        out[name] = torch.tensor(vals, dtype=dtype).reshape(dims)
        pos += size * math.prod(dims)
    assert pos == len(buf), "trailing bytes"
    return out


def check(path):
    """Parses FILE, lists its records, rebuilds the model from the stored
    config and parameters, and checks it reproduces the stored logits."""
    recs = read_file(path)
    for name, v in recs.items():
        desc = "text, %d bytes" % len(v) if isinstance(v, str) else "%s %s" % (v.dtype, tuple(v.shape))
        print("  %-42s %s" % (name, desc))
    c = dict(CFG)
    for k, v in (line.split("=", 1) for line in recs["config"].splitlines()):
        c[k] = v if k not in c or isinstance(c[k], str) else type(c[k])(v)
    model = Transformer(c)
    model.load_state_dict({n[6:]: t for n, t in recs.items() if n.startswith("param/")})
    with torch.no_grad():
        logits = model(recs["inputs"])
    assert torch.equal(logits, recs["logits"]), "stored logits differ from the model's"
    print("check OK: %d records, logits match the model's" % len(recs))


def train_steps(model, params, inputs, targets, c, before_update=None):
    """c["steps"] AdamW steps from the model's weights: (losses, clipped grad norms, LRs).
    before_update(), when given, runs before each optimizer step (an MoE's load balancing)."""
    opt = torch.optim.AdamW(params, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                            weight_decay=c["weight_decay"], foreach=False)
    losses, norms, lrs = [], [], []
    for s in range(1, c["steps"] + 1):
        opt.zero_grad()
        step_loss = loss_fn(model(inputs), targets)
        step_loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=c["max_norm"])
        lr = c["lr"] * lr_factor(s, c)
        for group in opt.param_groups:
            group["lr"] = lr
        if before_update is not None:
            before_update()
        opt.step()
        losses.append(step_loss.item()); norms.append(norm.item()); lrs.append(lr)
        print("step %2d  loss %.6f  grad_norm %.6f  lr %.6g" % (s, losses[-1], norms[-1], lr))
    return losses, norms, lrs


def generate(out):
    c = CFG
    torch.manual_seed(c["seed"])
    model = Transformer(c)
    model.init_weights()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(DATA_SEED)
    tokens = torch.randint(0, c["vocab_size"], (c["batch_size"], c["seq_len"] + 1), generator=g)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    logits = model(inputs)  # one forward + backward at the initial weights
    loss = loss_fn(logits, targets)
    loss.backward()
    named = list(model.named_parameters())
    grads_init = [p.grad.clone() for _, p in named]
    print("loss at init: %r" % loss.item())

    model.load_state_dict(init_state)  # train from the same initial weights
    losses, norms, lrs = train_steps(model, [p for _, p in named], inputs, targets, c)

    config = dict(c, torch_version=torch.__version__)
    text = "".join("%s=%s\n" % (k, v if isinstance(v, str) else repr(v)) for k, v in config.items())
    recs = [record("config", text), record("inputs", inputs), record("targets", targets)]
    recs += [record("param/" + n, init_state[n]) for n, _ in named]
    recs += [record("logits", logits.float()), record("loss", loss.float())]
    recs += [record("grad/" + n, gr) for (n, _), gr in zip(named, grads_init)]
    recs += [record(n, torch.tensor(v, dtype=torch.float32))
             for n, v in (("step_losses", losses), ("step_grad_norms", norms), ("step_lrs", lrs))]
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<II", VERSION, len(recs)) + b"".join(recs))
    print("wrote %s (%d records)" % (out, len(recs)))


def reference_main(description, generate_fn, check_fn):
    """The command line of a reference script: --out FILE writes and checks, --check FILE checks."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", help="write the reference file here")
    ap.add_argument("--check", metavar="FILE", help="parse FILE back and verify its logits")
    args = ap.parse_args()
    if not args.out and not args.check:
        ap.error("give --out FILE and/or --check FILE")
    torch.set_num_threads(1)  # deterministic, byte-identical output
    if args.out:
        generate_fn(args.out)
    for path in filter(None, (args.out, args.check)):
        check_fn(path)


if __name__ == "__main__":
    reference_main(__doc__.splitlines()[0], generate, check)

"""PyTorch reference for titan-train's Qwen3 model (parity test data).

What it is for: test/test_qwen3.cpp loads test/data/qwen3_reference.bin, builds
titan-train's Qwen3 module from the stored config, copies the stored parameters
(torchtitan's names) into it, and compares the logits, the loss, every gradient
and the gradient norm of one forward and backward, then the loss, clipped
gradient norm and LR of 10 AdamW steps from the same weights (torchtitan's
warmup-stable-decay schedule and clipping, as llama_reference.py trains).

Model: torchtitan v0.2.2's dense Qwen3 (torchtitan/models/qwen3/model/model.py),
written out in plain PyTorch that runs on Debian's PyTorch: per-head q/k RMSNorm
before RoPE, RoPE by rotate_half on a (T, 2 head_dim) cos/sin cache, GQA, a
head_dim other than dim / n_heads, SwiGLU with the hidden size given, and the
output projection tied to the embedding (one parameter). Weights: normal draws
under manual_seed(1337), every RMSNorm weight 1 + 0.1 randn, so that the norms
are exercised.

How to regenerate: scripts/reference/generate.sh. The file format is
llama_reference.py's (version 1); records in order: config, inputs, targets,
param/<name> (named_parameters() order), logits, loss, grad/<name>, grad_norm,
step_losses, step_grad_norms, step_lrs.
"""
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

from llama_reference import (MAGIC, VERSION, RMSNorm, loss_fn, read_file, record, reference_main,
                             repeat_kv, train_steps)

CFG = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, hidden_dim=96,
           vocab_size=300, norm_eps=1e-6, rope_theta=1000000.0, tie_embeddings=1, seq_len=32,
           batch_size=2, seed=1337, lr=8e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
           max_norm=1.0, steps=10, warmup_steps=2, decay_ratio=0.8, decay_type="linear",
           min_lr_factor=0.0)
DATA_SEED = 7


def rope_cache(head_dim, seq_len, theta):  # (T, 2E): cos(cat(f, f)), then sin(cat(f, f))
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=freqs.dtype), freqs).float()
    both = torch.cat([angles, angles], dim=-1)
    return torch.cat([both.cos(), both.sin()], dim=-1)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cache):  # x: (B, T, H, E)
    T, E = x.shape[1], x.shape[-1]
    c = cache[:T].view(1, T, 1, 2 * E)
    cos, sin = c[..., :E].to(x.dtype), c[..., E:].to(x.dtype)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.q_norm = RMSNorm(self.head_dim, c["norm_eps"])
        self.k_norm = RMSNorm(self.head_dim, c["norm_eps"])
        self.wq = nn.Linear(c["dim"], self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(c["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(c["dim"], self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, c["dim"], bias=False)

    def forward(self, x, cache):
        B, T, _ = x.shape
        q = self.q_norm(self.wq(x).view(B, T, -1, self.head_dim))
        k = self.k_norm(self.wk(x).view(B, T, -1, self.head_dim))
        v = self.wv(x).view(B, T, -1, self.head_dim)
        q, k = apply_rope(q, cache), apply_rope(k, cache)
        n_rep = self.n_heads // self.n_kv_heads
        q, k, v = (t.transpose(1, 2) for t in (q, repeat_kv(k, n_rep), repeat_kv(v, n_rep)))
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        mask = torch.full((T, T), float("-inf")).triu(1)
        out = torch.softmax(scores + mask, dim=-1) @ v  # (B, H, T, E)
        return self.wo(out.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w1 = nn.Linear(c["dim"], c["hidden_dim"], bias=False)
        self.w2 = nn.Linear(c["hidden_dim"], c["dim"], bias=False)
        self.w3 = nn.Linear(c["dim"], c["hidden_dim"], bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention, self.feed_forward = Attention(c), FeedForward(c)
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])

    def forward(self, x, cache):
        h = x + self.attention(self.attention_norm(x), cache)
        return h + self.feed_forward(self.ffn_norm(h))


class Qwen3(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        assert c["tie_embeddings"]  # the output is the embedding's weight: one parameter
        self.register_buffer("cache", rope_cache(c["head_dim"], c["seq_len"], c["rope_theta"]),
                             persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.cache)
        return F.linear(self.norm(h), self.tok_embeddings.weight)


def write_reference(build, c, out, before_update=None, final_records=lambda model: [],
                    before_steps=None):
    """Builds build(c) under manual_seed(c["seed"]), draws its weights (every RMSNorm weight
    1 + 0.1 randn, the embedding std 0.2, the rest std 0.02) and the batch, and writes the
    reference file: one forward and backward, then (after before_steps(model)) c["steps"] AdamW
    steps (before_update(model) before each optimizer step), then final_records(model)."""
    torch.manual_seed(c["seed"])
    model = build(c)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.02 if "tok_embeddings" not in name else 0.2)
    g = torch.Generator().manual_seed(DATA_SEED)
    tokens = torch.randint(0, c["vocab_size"], (c["batch_size"], c["seq_len"] + 1), generator=g)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    logits = model(inputs)
    loss = loss_fn(logits, targets)
    loss.backward()
    named = list(model.named_parameters())
    init_state = {n: p.detach().clone() for n, p in named}
    grads = {n: p.grad.clone() for n, p in named}
    norm = torch.sqrt(sum(p.grad.double().pow(2).sum() for _, p in named)).float()
    print("loss %r  grad_norm %r" % (loss.item(), norm.item()))
    if before_steps is not None:
        before_steps(model)
    steps = train_steps(model, [p for _, p in named], inputs, targets, c,
                        before_update and (lambda: before_update(model)))
    config = dict(c, torch_version=torch.__version__)
    text = "".join("%s=%s\n" % (k, v if isinstance(v, str) else repr(v)) for k, v in config.items())
    recs = [record("config", text), record("inputs", inputs), record("targets", targets)]
    recs += [record("param/" + n, init_state[n]) for n, _ in named]
    recs += [record("logits", logits.float()), record("loss", loss.float())]
    recs += [record("grad/" + n, grads[n]) for n, _ in named]
    recs += [record("grad_norm", norm)]
    recs += [record(n, torch.tensor(v, dtype=torch.float32))
             for n, v in zip(("step_losses", "step_grad_norms", "step_lrs"), steps)]
    recs += final_records(model)
    with open(out, "wb") as f:
        f.write(MAGIC + struct.pack("<II", VERSION, len(recs)) + b"".join(recs))
    print("wrote %s (%d records)" % (out, len(recs)))


def check_reference(build, c, path, strict=True):
    """Parses the file back and checks that build(c) with its weights gives its logits."""
    recs = read_file(path)
    model = build(c)
    model.load_state_dict({n[6:]: t for n, t in recs.items() if n.startswith("param/")},
                          strict=strict)
    with torch.no_grad():
        assert torch.equal(model(recs["inputs"]), recs["logits"]), "stored logits differ"
    print("check OK: %d records, logits match the model's" % len(recs))


def generate(out):
    write_reference(Qwen3, CFG, out)


def check(path):
    check_reference(Qwen3, CFG, path)


if __name__ == "__main__":
    reference_main(__doc__.splitlines()[0], generate, check)

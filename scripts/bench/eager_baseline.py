#!/usr/bin/env python3
"""Plain PyTorch-eager training loop: the baseline for scripts/bench.sh.

The C++ trainer is benchmarked against what a typical user would write in
Python: a Llama 3 model (as torchtitan builds it) made of plain nn.Modules,
trained with AdamW on random tokens in an ordinary eager loop, using the
naive attention (matmul + mask + softmax + matmul) by default; --attention
baddbmm folds the scale and an additive causal mask into one baddbmm (what a
user tuning the loop writes), --attention sdpa uses PyTorch's fused kernel.
--family qwen3 makes it torchtitan's dense Qwen3 instead: RMSNorm on each
head's q and k before RoPE, RoPE by rotate_half on a cos/sin cache, a head_dim
of its own (--head-dim), the SwiGLU hidden size given (--hidden-dim), and with
--tie the output projection sharing the embedding's weight.

It runs --warmup-steps untimed steps, times --steps steps, and prints one
machine-parseable line, "eager_baseline tokens_per_s=... step_ms=...
peak_rss_mib=... threads=... loss_first=... loss_last=...", where loss_first
is the very first step (warmup included) and loss_last the last timed one.

Run it from the repository root with a Python that has torch (Debian's
python3-torch 1.13 is /usr/bin/python3; a pyenv python3 may lack torch):

    python3 scripts/bench/eager_baseline.py                  # defaults
    python3 scripts/bench/eager_baseline.py --threads 2 --steps 20
    python3 scripts/bench/eager_baseline.py --attention sdpa

Only torch and the standard library are used.
"""
import argparse
import math
import os
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_PARAMS = 6_163_712  # dim 256, 6 layers, 16 heads, vocab 2048


def rope_frequencies(head_dim, seq_len, theta):
    """Complex RoPE factors (seq_len, head_dim // 2) with Llama 3.1 scaling."""
    freqs = 1.0 / (theta ** (
        torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    scale, low, high, old_len = 8.0, 1.0, 4.0, 8192.0
    scaled = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old_len / high:
            scaled.append(f)
        elif wavelen > old_len / low:
            scaled.append(f / scale)
        else:
            smooth = (old_len / wavelen - low) / (high - low)
            scaled.append((1 - smooth) * f / scale + smooth * f)
    freqs = torch.tensor(scaled, dtype=torch.float32)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x, freqs_cis):
    """x: (batch, seq, heads, head_dim); rotates interleaved pairs."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs = freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(xc * freqs).flatten(3).type_as(x)


def rope_cos_sin(head_dim, seq_len, theta):
    """Qwen3's RoPE cache: cos and sin (seq_len, head_dim) of each position's angles."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    both = torch.cat([angles, angles], dim=-1)
    return both.cos(), both.sin()


def apply_rope_half(x, cos, sin):
    """x: (batch, seq, heads, head_dim); rotates halves (rotate_half)."""
    seq, half = x.shape[1], x.shape[-1] // 2
    c, s = cos[:seq].view(1, seq, 1, -1), sin[:seq].view(1, seq, 1, -1)
    return x * c + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * s


def sdpa_causal(q, k, v):
    fn = getattr(F, "scaled_dot_product_attention", None)
    if fn is not None:
        return fn(q, k, v, is_causal=True)
    fn = getattr(torch._C._nn, "_scaled_dot_product_attention", None)
    if fn is None:
        raise RuntimeError("this torch has no scaled_dot_product_attention")
    # 1.13: (q, k, v, attn_mask, dropout_p, need_attn_weights, is_causal)
    out = fn(q, k, v, None, 0.0, False, True)
    return out[0] if isinstance(out, (tuple, list)) else out


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self, args, seq_len, attention):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.head_dim = args.head_dim or args.dim // args.n_heads
        self.kind = attention
        self.qwen3 = args.family == "qwen3"
        if self.qwen3:
            self.q_norm = RMSNorm(self.head_dim, 1e-6)
            self.k_norm = RMSNorm(self.head_dim, 1e-6)
        self.wq = nn.Linear(args.dim, self.n_heads * self.head_dim, bias=False)
        kv_dim = self.n_kv_heads * self.head_dim
        self.wk = nn.Linear(args.dim, kv_dim, bias=False)
        self.wv = nn.Linear(args.dim, kv_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, args.dim, bias=False)
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
        self.register_buffer("causal_mask", mask, persistent=False)
        additive = torch.zeros(seq_len, seq_len).masked_fill(mask, float("-inf"))
        self.register_buffer("additive_mask", additive, persistent=False)

    def forward(self, x, rope):
        bsz, seq, _ = x.shape
        q = self.wq(x).view(bsz, seq, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, seq, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(bsz, seq, self.n_kv_heads, self.head_dim)
        if self.qwen3:
            q, k = self.q_norm(q), self.k_norm(k)
            q, k = apply_rope_half(q, *rope), apply_rope_half(k, *rope)
        else:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, s, d)
        rep = self.n_heads // self.n_kv_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if self.kind == "baddbmm":
            b, h = q.shape[0], q.shape[1]
            scores = torch.baddbmm(
                self.additive_mask[:seq, :seq].expand(b * h, seq, seq),
                q.reshape(b * h, seq, -1), k.reshape(b * h, seq, -1).transpose(1, 2),
                alpha=1.0 / math.sqrt(self.head_dim))
            probs = F.softmax(scores, dim=-1)
            out = torch.bmm(probs, v.reshape(b * h, seq, -1)).view(b, h, seq, -1)
        elif self.kind == "naive":
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(self.causal_mask[:seq, :seq],
                                        float("-inf"))
            probs = F.softmax(scores.float(), dim=-1).type_as(q)
            out = probs @ v
        else:
            out = sdpa_causal(q, k, v)
        return self.wo(out.transpose(1, 2).reshape(bsz, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, multiple_of, ffn_dim_multiplier, hidden_dim=None):
        super().__init__()
        hidden = int(2 * 4 * dim / 3)
        if ffn_dim_multiplier is not None:
            hidden = int(ffn_dim_multiplier * hidden)
        hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
        hidden = hidden_dim or hidden
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, layer_id, args):
        super().__init__()
        self.attention = Attention(args, args.seq_len, args.attention)
        self.feed_forward = FeedForward(args.dim, args.multiple_of,
                                        args.ffn_dim_multiplier, args.hidden_dim)
        self.attention_norm = RMSNorm(args.dim)
        self.ffn_norm = RMSNorm(args.dim)
        std = 0.02 / math.sqrt(2 * (layer_id + 1))
        for lin in (self.attention.wq, self.attention.wk, self.attention.wv,
                    self.feed_forward.w1):
            nn.init.trunc_normal_(lin.weight, mean=0.0, std=0.02)
        for lin in (self.attention.wo, self.feed_forward.w2,
                    self.feed_forward.w3):
            nn.init.trunc_normal_(lin.weight, mean=0.0, std=std)

    def forward(self, x, rope):
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.tok_embeddings = nn.Embedding(args.vocab, args.dim)
        self.layers = nn.ModuleList(
            Block(i, args) for i in range(args.n_layers))
        self.norm = RMSNorm(args.dim)
        self.output = nn.Linear(args.dim, args.vocab, bias=False)
        head_dim = args.head_dim or args.dim // args.n_heads
        if args.family == "qwen3":
            self.rope = rope_cos_sin(head_dim, args.seq_len, args.rope_theta)
        else:
            self.rope = rope_frequencies(head_dim, args.seq_len, args.rope_theta)
        nn.init.normal_(self.tok_embeddings.weight, std=1.0)
        if args.tie:  # one parameter, whose last init is the output's (as torchtitan's)
            self.output.weight = self.tok_embeddings.weight
        std = args.dim ** -0.5
        nn.init.trunc_normal_(self.output.weight, mean=0.0, std=std,
                              a=-3 * std, b=3 * std)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.rope)
        return self.output(self.norm(h))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--n-layers", type=int, default=6)
    p.add_argument("--n-heads", type=int, default=16)
    p.add_argument("--n-kv-heads", type=int, default=None)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--multiple-of", type=int, default=256)
    p.add_argument("--ffn-dim-multiplier", type=float, default=None)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--family", choices=("llama3", "qwen3"), default="llama3")
    p.add_argument("--head-dim", type=int, default=None, help="default dim / n_heads")
    p.add_argument("--hidden-dim", type=int, default=None,
                   help="SwiGLU hidden size (default: Llama's rule)")
    p.add_argument("--tie", action="store_true", help="output tied to the embedding")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=8e-4)
    p.add_argument("--attention", choices=("naive", "baddbmm", "sdpa"),
                   default="naive")
    p.add_argument("--foreach", action="store_true",
                   help="AdamW's multi-tensor (foreach) implementation")
    args = p.parse_args(argv)
    if args.n_kv_heads is None:
        args.n_kv_heads = args.n_heads
    if (args.head_dim is None and args.dim % args.n_heads) or args.n_heads % args.n_kv_heads:
        p.error("dim must divide by n_heads (or give --head-dim), n_heads by n_kv_heads")
    if args.steps < 1:
        p.error("--steps must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = Transformer(args)
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    print(f"params={n_params:,}")
    shape = (args.dim, args.n_layers, args.n_heads, args.n_kv_heads,
             args.vocab, args.multiple_of, args.ffn_dim_multiplier)
    if shape == (256, 6, 16, 16, 2048, 256, None):
        assert n_params == DEFAULT_PARAMS, n_params

    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95),
                                  eps=1e-8, weight_decay=0.1,
                                  foreach=True if args.foreach else None)
    gen = torch.Generator().manual_seed(args.seed)

    def train_step():
        optimizer.zero_grad()
        batch = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1),
                              generator=gen)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(),
                               targets.flatten(0, 1), reduction="sum")
        loss = loss / targets.numel()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss.item()

    model.train()
    losses = [train_step() for _ in range(args.warmup_steps)]
    start = time.perf_counter()
    for _ in range(args.steps):
        losses.append(train_step())
    elapsed = time.perf_counter() - start

    tokens_per_s = args.batch * args.seq_len * args.steps / elapsed
    step_ms = elapsed / args.steps * 1000.0
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"eager_baseline tokens_per_s={tokens_per_s:.1f} "
          f"step_ms={step_ms:.1f} peak_rss_mib={peak_rss_mib:.1f} "
          f"threads={torch.get_num_threads()} loss_first={losses[0]:.4f} "
          f"loss_last={losses[-1]:.4f}")


if __name__ == "__main__":
    main()

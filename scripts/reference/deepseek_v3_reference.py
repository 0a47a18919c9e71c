"""PyTorch reference for titan-train's DeepSeek-V3 model (parity test data).

What it is for: test/test_deepseek_v3.cpp loads test/data/deepseek_v3_<case>_reference.bin,
builds titan-train's DeepSeek-V3 module from the stored config, copies the stored
parameters (torchtitan's names) into it, and compares the logits, the loss, every
gradient and the gradient norm of one forward and backward, then 10 AdamW steps with
load balancing (loss, clipped gradient norm, LR) and the expert biases they leave.

Model: torchtitan v0.2.2's DeepSeek-V3 (torchtitan/models/deepseek_v3/model/model.py),
written out in plain PyTorch that runs on Debian's PyTorch: multi-head latent
attention (wq or wq_a -> q_norm -> wq_b; wkv_a -> kv_norm -> wkv_b; the rotary parts
rotated as complex pairs; k's rotary part shared by the heads; v heads of their own
width), YaRN frequencies and the mscale softmax factor when seq_len exceeds
original_seq_len, nn.RMSNorm's formula (the final norm at float32's epsilon),
n_dense_layers SwiGLU blocks, then torchtitan's MoE (qwen3_moe_reference.py), blocks
registered as torchtitan's (attention, attention_norm, ffn_norm, then the
feed-forward or MoE layer), and the optimizer pre-hook's load balancing.
Cases:
  v3       q_lora_rank 0, YaRN on (seq_len 32 > original_seq_len 16, mscale 0.7),
           softmax router with 2 shared experts
  v3_lora  q_lora_rank 16, YaRN off, sigmoid router with node-limited groups,
           route_norm and route_scale 2.5
Weights: normal draws under manual_seed(1337), every RMSNorm weight 1 + 0.1 randn.

How to regenerate: scripts/reference/generate.sh. The file format is
llama_reference.py's (version 1), records as qwen3_moe_reference.py's.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen3_moe_reference import MoE, MoEModel, main
from qwen3_reference import FeedForward

COMMON = dict(dim=64, n_layers=2, n_dense_layers=1, n_heads=4, hidden_dim=96, vocab_size=300,
              norm_eps=1e-5, rope_theta=10000.0, kv_lora_rank=32, qk_nope_head_dim=16,
              qk_rope_head_dim=8, v_head_dim=16, rope_factor=40.0, beta_fast=32.0,
              beta_slow=1.0, seq_len=32, batch_size=2, seed=1337, lr=8e-4, beta1=0.9, beta2=0.95,
              eps=1e-8, weight_decay=0.1, max_norm=1.0, steps=10, warmup_steps=2,
              decay_ratio=0.8, decay_type="linear", min_lr_factor=0.0, moe_inter_dim=32,
              num_experts=8, load_balance_coeff=1e-3, gate_bias=0, score_before_experts=0,
              update_expert_bias=1)
CASES = {
    "v3": dict(COMMON, q_lora_rank=0, original_seq_len=16, mscale=0.7, top_k=2,
               score_func="softmax", route_norm=0, route_scale=1.0, num_shared_experts=2,
               num_expert_groups=0, num_limited_groups=0),
    "v3_lora": dict(COMMON, q_lora_rank=16, original_seq_len=64, mscale=1.0, top_k=3,
                    score_func="sigmoid", route_norm=1, route_scale=2.5, num_shared_experts=1,
                    num_expert_groups=4, num_limited_groups=2),
}


class RMSNorm(nn.Module):  # nn.RMSNorm's formula (PyTorch >= 2.4 has the module)
    def __init__(self, dim, eps=None):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


def precompute_freqs_cis(c):  # torchtitan's, YaRN included
    dim, seqlen, base = c["qk_rope_head_dim"], c["seq_len"], c["rope_theta"]

    def correction_dim(rot):
        return dim * math.log(c["original_seq_len"] / (rot * 2 * math.pi)) / (2 * math.log(base))

    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if seqlen > c["original_seq_len"]:
        low = max(math.floor(correction_dim(c["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(c["beta_slow"])), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        smooth = 1 - ramp
        freqs = freqs / c["rope_factor"] * (1 - smooth) + freqs * smooth
    freqs = torch.outer(torch.arange(seqlen), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(x, freqs_cis):  # x: (B, T, H, R)
    dtype = x.dtype
    x = torch.view_as_complex(x.float().view(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, x.shape[-1])
    return torch.view_as_real(x * freqs_cis).flatten(3).to(dtype)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, h, qk = c["dim"], c["n_heads"], c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
        if c["q_lora_rank"] == 0:
            self.wq = nn.Linear(d, h * qk, bias=False)
        else:
            self.wq_a = nn.Linear(d, c["q_lora_rank"], bias=False)
            self.q_norm = RMSNorm(c["q_lora_rank"], c["norm_eps"])
            self.wq_b = nn.Linear(c["q_lora_rank"], h * qk, bias=False)
        self.wkv_a = nn.Linear(d, c["kv_lora_rank"] + c["qk_rope_head_dim"], bias=False)
        self.kv_norm = RMSNorm(c["kv_lora_rank"], c["norm_eps"])
        self.wkv_b = nn.Linear(c["kv_lora_rank"], h * (c["qk_nope_head_dim"] + c["v_head_dim"]),
                               bias=False)
        self.wo = nn.Linear(h * c["v_head_dim"], d, bias=False)
        self.softmax_scale = qk ** -0.5
        if c["seq_len"] > c["original_seq_len"]:
            mscale = 0.1 * c["mscale"] * math.log(c["rope_factor"]) + 1.0
            self.softmax_scale = self.softmax_scale * mscale * mscale

    def forward(self, x, freqs_cis):
        c, (B, T, _) = self.c, x.shape
        nope, rope, vd, h = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["n_heads"]
        q = self.wq(x) if c["q_lora_rank"] == 0 else self.wq_b(self.q_norm(self.wq_a(x)))
        q = q.view(B, T, -1, nope + rope)
        q_nope, q_pe = torch.split(q, [nope, rope], dim=-1)
        q = torch.cat([q_nope, apply_rotary_emb(q_pe, freqs_cis)], dim=-1)
        kv = self.wkv_a(x)
        kv, k_pe = torch.split(kv, [c["kv_lora_rank"], rope], dim=-1)
        k_pe = apply_rotary_emb(k_pe.unsqueeze(2), freqs_cis)
        kv = self.wkv_b(self.kv_norm(kv)).view(B, T, -1, nope + vd)
        k_nope, v = torch.split(kv, [nope, vd], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, -1, h, -1)], dim=-1)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(-2, -1) * self.softmax_scale
        mask = torch.full((T, T), float("-inf")).triu(1)
        out = torch.softmax(scores + mask, dim=-1) @ v  # (B, H, T, V)
        return self.wo(out.transpose(1, 2).contiguous().view(B, T, -1))


class Block(nn.Module):
    def __init__(self, c, layer):
        super().__init__()
        self.attention = Attention(c)
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])
        if layer >= c["n_dense_layers"]:
            self.moe = MoE(c)
        else:
            self.feed_forward = FeedForward(c)

    def forward(self, x, freqs_cis):
        x = x + self.attention(self.attention_norm(x), freqs_cis)
        ffn = self.moe if hasattr(self, "moe") else self.feed_forward
        return x + ffn(self.ffn_norm(x))


class DeepSeekV3(MoEModel):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.register_buffer("freqs_cis", precompute_freqs_cis(c), persistent=False)
        self.layers = nn.ModuleList(Block(c, i) for i in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"])
        self.output = nn.Linear(c["dim"], c["vocab_size"], bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


if __name__ == "__main__":
    main(__doc__.splitlines()[0], CASES, DeepSeekV3)

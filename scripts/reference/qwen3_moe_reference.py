"""PyTorch reference for titan-train's mixture-of-experts layer (parity test data).

What it is for: test/test_moe.cpp loads test/data/moe_<case>_reference.bin, builds
titan-train's Qwen3 module from the stored config, copies the stored parameters
(torchtitan's names) into it, and compares the logits, the loss, every gradient
and the gradient norm of one forward and backward, then 10 AdamW steps (loss,
clipped gradient norm, LR) and the expert biases they leave.

Model: Qwen3's attention (qwen3_reference.py) with torchtitan v0.2.2's MoE layer
(torchtitan/models/moe/moe.py) in place of the feed-forward from block
n_dense_layers on, written out in plain PyTorch that runs on Debian's PyTorch:
TokenChoiceTopKRouter (float32 softmax or sigmoid, expert_bias for the choice
only, node-limited groups, torch.topk, route_norm, route_scale), TokenReorderer
(stable argsort), GroupedExperts on its for-loop path (float32), shared experts,
score_before_experts, and the optimizer pre-hook's load balancing
(build_optimizers_with_moe_load_balancing) when the case updates the bias.
Cases:
  qwen3   torchtitan's Qwen3-MoE router: softmax, route_norm, scores after the
          experts, no shared experts; the bias never updated (as v0.2.2's qwen3)
  router  every other option: sigmoid, 4 groups of which 2 eligible, top-3,
          route_scale 2.5, gate bias, scores before the experts, a shared expert,
          a dense first block, the bias updated before each step
Weights: normal draws under manual_seed(1337), every RMSNorm weight 1 + 0.1 randn.

How to regenerate: scripts/reference/generate.sh. The file format is
llama_reference.py's (version 1); records: config, inputs, targets,
param/<name> (named_parameters() order), logits, loss, grad/<name>, grad_norm,
step_losses, step_grad_norms, step_lrs, final/<layer>.moe.expert_bias.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from llama_reference import RMSNorm, record
from qwen3_reference import (Attention, FeedForward, check_reference, rope_cache,
                             write_reference)

COMMON = dict(dim=64, n_heads=4, n_kv_heads=2, head_dim=32, hidden_dim=96, vocab_size=300,
              norm_eps=1e-6, rope_theta=1000000.0, tie_embeddings=0, seq_len=32, batch_size=2,
              seed=1337, lr=8e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
              max_norm=1.0, steps=10, warmup_steps=2, decay_ratio=0.8, decay_type="linear",
              min_lr_factor=0.0, moe_inter_dim=32, num_experts=8, load_balance_coeff=1e-3)
CASES = {
    "qwen3": dict(COMMON, n_layers=2, n_dense_layers=0, top_k=2, score_func="softmax",
                  route_norm=1, route_scale=1.0, score_before_experts=0, num_shared_experts=0,
                  gate_bias=0, num_expert_groups=0, num_limited_groups=0,
                  update_expert_bias=0),
    "router": dict(COMMON, n_layers=2, n_dense_layers=1, top_k=3, score_func="sigmoid",
                   route_norm=1, route_scale=2.5, score_before_experts=1, num_shared_experts=1,
                   gate_bias=1, num_expert_groups=4, num_limited_groups=2,
                   update_expert_bias=1),
}


class Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.gate = nn.Linear(c["dim"], c["num_experts"], bias=bool(c["gate_bias"]))

    def limit_to_groups(self, s):  # torchtitan's _get_node_limited_routing_scores
        c = self.c
        grouped = s.view(-1, c["num_expert_groups"], c["num_experts"] // c["num_expert_groups"])
        group_scores = grouped.topk(2, dim=-1)[0].sum(dim=-1)
        _, group_idx = torch.topk(group_scores, k=c["num_limited_groups"], dim=-1, sorted=False)
        mask = torch.ones_like(group_scores, dtype=torch.bool).scatter_(1, group_idx, False)
        return grouped.masked_fill(mask.unsqueeze(-1), float("-inf")).view(-1, c["num_experts"])

    def forward(self, x, expert_bias):
        c = self.c
        scores = self.gate(x)
        if c["score_func"] == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        else:
            scores = F.softmax(scores.to(torch.float32), dim=1)
        for_choice = scores + expert_bias
        if c["num_expert_groups"]:
            for_choice = self.limit_to_groups(for_choice)
        _, selected = torch.topk(for_choice, k=c["top_k"], dim=-1, sorted=False)
        top_scores = scores.gather(dim=1, index=selected)
        if c["route_norm"]:
            top_scores = top_scores / (top_scores.sum(dim=-1, keepdim=True) + 1e-20)
        top_scores = top_scores * c["route_scale"]
        # torchtitan's histc (float counts), which CPU PyTorch has for floating inputs only
        counts = torch.bincount(selected.view(-1), minlength=c["num_experts"]).float()
        return top_scores, selected, counts


class GroupedExperts(nn.Module):
    def __init__(self, c):
        super().__init__()
        e, h, d = c["num_experts"], c["moe_inter_dim"], c["dim"]
        self.w1 = nn.Parameter(torch.empty(e, h, d))
        self.w2 = nn.Parameter(torch.empty(e, d, h))
        self.w3 = nn.Parameter(torch.empty(e, h, d))

    def forward(self, x, counts):  # torchtitan's _run_experts_for_loop
        outs = []
        for e, xe in enumerate(torch.split(x, counts.tolist(), dim=0)):
            h = F.silu(xe @ self.w1[e].transpose(-2, -1)) * (xe @ self.w3[e].transpose(-2, -1))
            outs.append(h @ self.w2[e].transpose(-2, -1))
        return torch.cat(outs, dim=0)


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.experts, self.router = GroupedExperts(c), Router(c)
        self.shared_experts = (FeedForward(dict(c, hidden_dim=c["moe_inter_dim"] * c["num_shared_experts"]))
                               if c["num_shared_experts"] else None)
        self.register_buffer("expert_bias", torch.zeros(c["num_experts"]))
        self.register_buffer("tokens_per_expert", torch.zeros(c["num_experts"]), persistent=False)

    def forward(self, x):
        c, (bs, slen, dim) = self.c, x.shape
        x = x.view(-1, dim)
        top_scores, selected, counts = self.router(x, self.expert_bias)
        with torch.no_grad():
            self.tokens_per_expert.add_(counts)
        order = torch.argsort(selected.view(-1), stable=True)
        scores_sorted = top_scores.view(-1)[order]
        routed = x[order // c["top_k"]]
        if c["score_before_experts"]:
            routed = (routed.to(torch.float32) * scores_sorted.reshape(-1, 1)).to(x.dtype)
        routed_out = self.experts(routed, counts.long())
        out = self.shared_experts(x) if self.shared_experts is not None else None
        unsorted = torch.zeros(bs * slen * c["top_k"], dim, dtype=routed_out.dtype)
        unsorted[order] = routed_out
        unsorted = unsorted.reshape(-1, c["top_k"], dim)
        if not c["score_before_experts"]:
            experts_out = torch.bmm(top_scores.reshape(-1, 1, c["top_k"]),
                                    unsorted.float()).to(x.dtype).squeeze(1)
        else:
            experts_out = unsorted.sum(dim=1)
        if out is None:
            return experts_out.reshape(bs, slen, dim)
        return (out + experts_out).reshape(bs, slen, dim)


class MoEModel(nn.Module):
    """A model whose blocks may hold an MoE layer (`moe`): their load balancing."""

    def moe_layers(self):
        return [(i, b.moe) for i, b in enumerate(self.layers) if hasattr(b, "moe")]

    def update_expert_bias(self):  # torchtitan's _update_expert_bias, one process, no AC
        counts = torch.vstack([m.tokens_per_expert for _, m in self.moe_layers()])
        with torch.no_grad():
            for k, (_, moe) in enumerate(self.moe_layers()):
                t = counts[k].float()
                delta = self.c["load_balance_coeff"] * torch.sign(t.mean() - t)
                moe.expert_bias.add_(delta - delta.mean())
                moe.tokens_per_expert.zero_()

    def zero_counts(self):
        for _, moe in self.moe_layers():
            moe.tokens_per_expert.zero_()

    def balance(self):  # the optimizer pre-hook: update the biases where the case does
        if self.c["update_expert_bias"]:
            self.update_expert_bias()
        self.zero_counts()


class Block(nn.Module):
    def __init__(self, c, layer):
        super().__init__()
        self.attention = Attention(c)
        if layer >= c["n_dense_layers"]:
            self.moe = MoE(c)
        else:
            self.feed_forward = FeedForward(c)
        self.attention_norm = RMSNorm(c["dim"], c["norm_eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["norm_eps"])

    def forward(self, x, cache):
        h = x + self.attention(self.attention_norm(x), cache)
        ffn = self.moe if hasattr(self, "moe") else self.feed_forward
        return h + ffn(self.ffn_norm(h))


class Qwen3MoE(MoEModel):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.layers = nn.ModuleList(Block(c, i) for i in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.output = nn.Linear(c["dim"], c["vocab_size"], bias=False)
        self.register_buffer("cache", rope_cache(c["head_dim"], c["seq_len"], c["rope_theta"]),
                             persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.cache)
        return self.output(self.norm(h))


def final_biases(model):
    return [record("final/layers.%d.moe.expert_bias" % i, m.expert_bias)
            for i, m in model.moe_layers()]


def generate_case(build, cases, case, out):
    """The reference file of cases[case]: load balancing before each step, the final biases."""
    c = dict(cases[case], case=case)
    write_reference(build, c, out, MoEModel.balance, final_biases, MoEModel.zero_counts)


def main(description, cases, build):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--case", choices=sorted(cases), required=True)
    ap.add_argument("--out", required=True, help="write the reference file here")
    args = ap.parse_args()
    torch.set_num_threads(1)  # deterministic, byte-identical output
    generate_case(build, cases, args.case, args.out)
    check_reference(build, dict(cases[args.case], case=args.case), args.out, strict=False)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], CASES, Qwen3MoE)

#!/usr/bin/env bash
# Regenerates test/data/llama_reference.bin, qwen3_reference.bin, moe_*_reference.bin and
# deepseek_v3_*_reference.bin, the
# PyTorch references that the C++ parity tests compare titan-train's models against, and the
# Hugging Face import's reference (test/data/hf_tiny/, hf_llama_reference.bin,
# hf_reference_run/: scripts/reference/hf_llama_reference.py).
# Needs Debian's PyTorch (python3-torch) at /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "reference: python3-torch (Debian's PyTorch) is needed; installing it with apt-get" >&2
  if [ "$(id -u)" -eq 0 ]; then
    apt-get install -y python3-torch
  else
    sudo apt-get install -y python3-torch
  fi
fi

mkdir -p test/data
/usr/bin/python3 scripts/reference/llama_reference.py --out test/data/llama_reference.bin
# The Hugging Face import's reference: a tied bf16 sharded checkpoint of the tiny flavor, the
# logits a transformers-convention Llama computes from it, and that forward's numerics trace.
/usr/bin/python3 scripts/reference/hf_llama_reference.py --data-dir test/data
# Qwen3's: a tied 2-layer model with head_dim other than dim / n_heads (test_qwen3.cpp).
/usr/bin/python3 scripts/reference/qwen3_reference.py --out test/data/qwen3_reference.bin
# The mixture-of-experts layer's: torchtitan's Qwen3-MoE router, and every other router option with
# load balancing (test_moe.cpp).
for case in qwen3 router; do
  /usr/bin/python3 scripts/reference/qwen3_moe_reference.py --case "$case" \
    --out "test/data/moe_${case}_reference.bin"
done
# DeepSeek-V3's: multi-head latent attention with and without the q bottleneck, YaRN, dense then
# MoE blocks, load balancing (test_deepseek_v3.cpp).
for case in v3 v3_lora; do
  /usr/bin/python3 scripts/reference/deepseek_v3_reference.py --case "$case" \
    --out "test/data/deepseek_v3_${case}_reference.bin"
done

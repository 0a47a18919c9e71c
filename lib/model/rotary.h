// RoPE on interleaved pairs, as Llama 3 and DeepSeek-V3 apply it in torchtitan: each pair
// (2i, 2i+1) of a head is one complex number, multiplied by the position's e^(i f_i t).
#pragma once

#include <ATen/ATen.h>

namespace titan {

// Rotates interleaved pairs (2i, 2i+1) of x: (B, T, H, E) by freqs_cis: (>= T, E/2) complex
// (its first T rows), in float32 (float64 for a float64 x); returns x's dtype.
at::Tensor apply_rotary_emb(const at::Tensor& x, const at::Tensor& freqs_cis);

}  // namespace titan

#include "model/rotary.h"

namespace titan {

at::Tensor apply_rotary_emb(const at::Tensor& x, const at::Tensor& freqs_cis) {
  const auto B = x.size(0), T = x.size(1), H = x.size(2), E = x.size(3);
  // Rotated in float32 (torchtitan's), or in float64 for a float64 input.
  const auto real = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto xc = at::view_as_complex(x.to(real).reshape({B, T, H, E / 2, 2}));  // (B, T, H, E/2)
  auto rotated = xc * freqs_cis.slice(0, 0, T).view({1, T, 1, E / 2});
  return at::view_as_real(rotated).flatten(3).to(x.scalar_type());  // (B, T, H, E)
}

}  // namespace titan

// The fused attention's backward computes the forward's weights again instead of saving them
// (model/attention_kernels.h): its probabilities must be the forward's, bit for bit.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include "catch_torch.h"
#include "model/causal_attention.h"
#include "test_util.h"
#include "util/cpu_features.h"

using namespace titan;

namespace {

// (1, 1, T, D) with row t the unit vector e_t (D >= T).
at::Tensor unit_rows(int64_t T, int64_t D) {
  return at::eye(T, D, at::kFloat).reshape({1, 1, T, D});
}

}  // namespace

// With v's rows the unit vectors, out[i][j] = weight[i][j] * inverse sum: the forward's
// probability p[i][j], rounded once. With grad_out's rows the unit vectors too,
// dv[j][i] = p[i][j] * 1 plus products with 0: the backward's p[i][j], exactly. So dv^T equals
// out bit for bit only if the backward's recomputed scores, maxima and exponentials are the
// forward's. Scores spread over about +-30; T crosses panels (16 rows) and is not a multiple of 16.
TEST_CASE(
    "model: fused attention's backward recomputes the forward's probabilities bit for bit, at each "
    "vector width",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  const int64_t T = 45, D = 48;
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(5);
    auto q = (4 * at::randn({1, 1, T, D})).requires_grad_(), k = at::randn({1, 1, T, D});
    auto v = unit_rows(T, D).requires_grad_();
    auto out = fused_causal_attention(q, k, v);
    auto dv = torch::autograd::grad({out}, {v}, {unit_rows(T, D)})[0];
    auto forward_p = out.index({0, 0, at::indexing::Slice(), at::indexing::Slice(0, T)});
    auto backward_p = dv.index({0, 0, at::indexing::Slice(), at::indexing::Slice(0, T)}).t();
    CHECK(forward_p.max().item<float>() > 0.99f);  // some rows are nearly one-hot
    CHECK(at::equal(forward_p, backward_p));
  }
}

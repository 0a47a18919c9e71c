// Model: shapes and parameter counts, RoPE against hand-computed values, GQA head mapping,
// the blocked and fused causal attention against the naive formula, the fused SwiGLU and RMSNorm
// against ATen, and causality.
#include <torch/torch.h>

#include <cmath>

#include "catch_torch.h"
#include "llama3/transformer.h"
#include "model/attention_kernels.h"
#include "model/causal_attention.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "models/registry.h"
#include "test_util.h"
#include "util/blas_threads.h"

using namespace titan;

TEST_CASE("model: debugmodel has 6,163,712 parameters", "[model]") {
  ModelArgs args = flavor_args("llama3", "debugmodel");
  CHECK(args.ffn_hidden_dim() == 768);
  CHECK(args.num_params() == 6163712);
  args.max_seq_len = 16;
  Transformer model(args);
  int64_t counted = 0;
  for (auto& p : model->parameters()) counted += p.numel();
  CHECK(counted == 6163712);
  CHECK(model->named_parameters().contains("layers.5.attention.wq.weight"));
  CHECK(model->named_parameters().contains("layers.0.feed_forward.w3.weight"));
  CHECK(model->named_parameters().contains("norm.weight"));
  CHECK(model->named_parameters().contains("output.weight"));
}

TEST_CASE(
    "model: the registry builds model.name's family, its units hold every parameter once, in "
    "order, and a family not registered is refused naming those that are",
    "[model]") {
  ModelArgs args = test::tiny_model_args();
  CHECK(model_families() == std::vector<std::string>{"llama3", "qwen3", "deepseek_v3"});
  torch::manual_seed(3);
  Model built = build_model(args);
  torch::manual_seed(3);
  Transformer direct(args);
  REQUIRE(dynamic_cast<TransformerImpl*>(built.get()) != nullptr);
  const auto a = built->named_parameters(), b = direct->named_parameters();
  REQUIRE(a.keys() == b.keys());
  for (const auto& key : a.keys()) CHECK(at::equal(a[key], b[key]));
  // embedding, blocks, head: the order FSDP shards and checkpoints count on
  std::vector<at::Tensor> units = built->unit_parameters(ParamUnit::kEmbedding, -1);
  for (int64_t layer = 0; layer < built->n_blocks(); ++layer) {
    for (const auto& p : built->unit_parameters(ParamUnit::kBlock, layer)) units.push_back(p);
  }
  for (const auto& p : built->unit_parameters(ParamUnit::kHead, -1)) units.push_back(p);
  const auto params = built->parameters();
  REQUIRE(units.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(units[i].is_same(params[i]));
  args.family = "qwen9";
  try {
    build_model(args);
    FAIL("an unregistered family was built");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) ==
          "no model family \"qwen9\" (registered: llama3, qwen3, deepseek_v3)");
  }
}

TEST_CASE("model: flavor shapes match Llama 3", "[model]") {
  CHECK(flavor_args("llama3", "8B").ffn_hidden_dim() == 14336);
  CHECK(flavor_args("llama3", "70B").ffn_hidden_dim() == 28672);
  CHECK(flavor_args("llama3", "405B").ffn_hidden_dim() == 53248);
  CHECK(flavor_args("llama3", "1B").ffn_hidden_dim() == 8192);
  // 8B with an untied output layer: 8,030,261,248 parameters.
  CHECK(flavor_args("llama3", "8B").num_params() == 8030261248LL);
}

TEST_CASE("model: RoPE frequencies follow Llama 3.1 scaling, computed by hand", "[model]") {
  const int64_t head_dim = 16;
  const double theta = 500000;
  auto freqs_cis = precompute_freqs_cis(head_dim, 64, theta, RopeScaling{});
  REQUIRE(freqs_cis.sizes() == at::IntArrayRef({64, 8}));
  auto angle = [&](int64_t t, int64_t i) {
    double freq = 1.0 / std::pow(theta, 2.0 * i / head_dim);
    double wavelen = 2 * M_PI / freq;
    if (wavelen > 8192.0) {
      freq /= 8.0;  // low frequencies: divided by the factor
    } else if (wavelen >= 2048.0) {
      double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      freq = (1 - smooth) * freq / 8.0 + smooth * freq;
    }
    return t * freq;
  };
  auto real = at::view_as_real(freqs_cis);  // (T, E/2, 2)
  for (int64_t t : {0, 1, 7, 63}) {
    for (int64_t i = 0; i < 8; ++i) {
      INFO("t=" << t << " i=" << i);
      CHECK(real[t][i][0].item<double>() == Approx(std::cos(angle(t, i))).margin(2e-6));
      CHECK(real[t][i][1].item<double>() == Approx(std::sin(angle(t, i))).margin(2e-6));
    }
  }
  // i = 4 is in the smoothed band (wavelength 2 pi theta^0.5 = 4443), i = 7 in the divided band,
  // i = 0 unscaled.
}

TEST_CASE("model: rotary embedding rotates interleaved pairs", "[model]") {
  auto freqs = at::polar(at::ones({2, 2}), at::tensor({0.0f, 0.0f, 0.5f, 1.0f}).view({2, 2}));
  // x: (B=1, T=2, H=1, E=4), every pair (1, 0).
  auto x = at::tensor({1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f}).view({1, 2, 1, 4});
  auto y = apply_rotary_emb(x, freqs);
  auto expected = at::tensor({1.0f, 0.0f, 1.0f, 0.0f, std::cos(0.5f), std::sin(0.5f),
                              std::cos(1.0f), std::sin(1.0f)})
                      .view({1, 2, 1, 4});
  CHECK(at::allclose(y, expected, 1e-6, 1e-6));
}

TEST_CASE("model: repeat_kv gives kv head j to query heads j*n_rep .. j*n_rep+n_rep-1", "[model]") {
  auto kv = at::arange(2, at::kFloat).view({1, 1, 2, 1});  // heads 0 and 1
  auto repeated = repeat_kv(kv, 3).flatten();
  CHECK(at::equal(repeated, at::tensor({0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f})));
}

namespace {
at::Tensor naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  auto T = q.size(2);
  auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  auto mask = at::ones({T, T}, at::kBool).triu(1);
  return at::matmul(at::softmax(scores.masked_fill(mask, -INFINITY), -1), v);
}
}  // namespace

TEST_CASE("model: blocked causal attention equals the naive formula, values and gradients",
          "[model]") {
  torch::manual_seed(0);
  for (int64_t T : {1, 5, 37, 128}) {
    INFO("T=" << T);
    auto q = at::randn({2, 3, T, 8}).requires_grad_(), k = at::randn({2, 3, T, 8}).requires_grad_(),
         v = at::randn({2, 3, T, 8}).requires_grad_();
    auto grad = at::randn({2, 3, T, 8});
    auto expected = naive_attention(q, k, v);
    auto expected_grads = torch::autograd::grad({expected}, {q, k, v}, {grad});
    auto got = blocked_causal_attention(q, k, v, /*block=*/16);
    auto got_grads = torch::autograd::grad({got}, {q, k, v}, {grad});
    CHECK(at::allclose(got, expected, 1e-5, 1e-5));
    for (int i = 0; i < 3; ++i) CHECK(at::allclose(got_grads[i], expected_grads[i], 1e-4, 1e-5));
  }
}

TEST_CASE("model: blocked causal attention is bitwise the same on 1 and 2 intra-op threads",
          "[model]") {
  torch::manual_seed(0);
  auto q = at::randn({2, 4, 300, 16}).requires_grad_(),
       k = at::randn({2, 4, 300, 16}).requires_grad_(),
       v = at::randn({2, 4, 300, 16}).requires_grad_();
  auto grad = at::randn({2, 4, 300, 16});
  auto run = [&](int threads) {
    const int previous = at::get_num_threads();
    at::set_num_threads(threads);
    set_blas_threads(threads);
    auto out = blocked_causal_attention(q, k, v);
    auto grads = torch::autograd::grad({out}, {q, k, v}, {grad});
    at::set_num_threads(previous);
    set_blas_threads(previous);
    grads.insert(grads.begin(), out);
    return grads;
  };
  auto one = run(1), two = run(2);
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output " << i << " (0 = attention, then dq, dk, dv)");
    CHECK(at::equal(one[i], two[i]));
  }
}

TEST_CASE("model: fused causal attention equals the naive formula, values and gradients",
          "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  for (int64_t D : {8, 16, 24, 64}) {
    for (int64_t T : {1, 3, 8, 17, 37, 130}) {
      INFO("T=" << T << " D=" << D);
      auto q = at::randn({2, 3, T, D}).requires_grad_(),
           k = at::randn({2, 3, T, D}).requires_grad_(),
           v = at::randn({2, 3, T, D}).requires_grad_();
      auto grad = at::randn({2, 3, T, D});
      auto expected = naive_attention(q, k, v);
      auto expected_grads = torch::autograd::grad({expected}, {q, k, v}, {grad});
      auto got = fused_causal_attention(q, k, v);
      auto got_grads = torch::autograd::grad({got}, {q, k, v}, {grad});
      CHECK(at::allclose(got, expected, 1e-5, 1e-5));
      for (int i = 0; i < 3; ++i) {
        INFO("gradient " << i << " (dq, dk, dv)");
        CHECK(at::allclose(got_grads[i], expected_grads[i], 1e-4, 1e-5));
      }
    }
  }
}

TEST_CASE(
    "model: fused causal attention, at each vector width, is as close to a float64 reference as "
    "ATen's float32",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(3);
    // Scores spread over about +-20, so that exp's whole range is used.
    auto q = (3 * at::randn({2, 4, 200, 16})).requires_grad_(), k = at::randn({2, 4, 200, 16}),
         v = at::randn({2, 4, 200, 16});
    auto grad = at::randn({2, 4, 200, 16});
    auto reference = naive_attention(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble));
    auto reference_dq = torch::autograd::grad({reference}, {q}, {grad.to(at::kDouble)})[0];
    auto error = [&](const at::Tensor& out) {
      auto dq = torch::autograd::grad({out}, {q}, {grad})[0];
      return std::make_pair((out.to(at::kDouble) - reference).abs().max().item<double>(),
                            (dq.to(at::kDouble) - reference_dq).abs().max().item<double>());
    };
    auto [aten_out, aten_dq] = error(naive_attention(q, k, v));
    auto [fused_out, fused_dq] = error(fused_causal_attention(q, k, v));
    INFO("max error against float64: ATen out " << aten_out << " dq " << aten_dq << ", fused out "
                                                << fused_out << " dq " << fused_dq);
    CHECK(fused_out <= 2 * aten_out);
    CHECK(fused_dq <= 2 * aten_dq);
  }
}

TEST_CASE(
    "model: fused causal attention, at each vector width, reads strided heads and is bitwise the "
    "same on 1 and 2 "
    "intra-op threads",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(0);
    // (B, T, H, D) tensors seen as (B, H, T, D), as the model passes them.
    auto make = [] { return at::randn({2, 301, 4, 16}).transpose(1, 2).requires_grad_(); };
    auto q = make(), k = make(), v = make();
    auto grad = at::randn({2, 4, 301, 16});
    auto run = [&](int threads, bool contiguous) {
      const int previous = at::get_num_threads();
      at::set_num_threads(threads);
      auto qi = contiguous ? q.contiguous() : q, ki = contiguous ? k.contiguous() : k,
           vi = contiguous ? v.contiguous() : v;
      auto out = fused_causal_attention(qi, ki, vi);
      auto grads = torch::autograd::grad({out}, {q, k, v}, {grad});
      at::set_num_threads(previous);
      grads.insert(grads.begin(), out);
      return grads;
    };
    auto one = run(1, false), two = run(2, false), packed = run(2, true);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("output " << i << " (0 = attention, then dq, dk, dv)");
      CHECK(at::equal(one[i], two[i]));
      CHECK(at::equal(one[i], packed[i]));
    }
  }
}

TEST_CASE("model: logits at position t do not depend on tokens after t", "[model]") {
  torch::manual_seed(1);
  ModelArgs args = flavor_args("llama3", "tiny");
  args.max_seq_len = 32;
  Transformer model(args);
  model->init_weights();
  auto tokens = at::randint(0, args.vocab_size, {1, 32}, at::kLong);
  auto changed = tokens.clone();
  changed.index_put_({0, at::indexing::Slice(20)}, 7);
  torch::NoGradGuard no_grad;
  auto a = model->forward(tokens), b = model->forward(changed);
  CHECK(at::equal(a.narrow(1, 0, 20), b.narrow(1, 0, 20)));
  CHECK_FALSE(at::equal(a.narrow(1, 20, 12), b.narrow(1, 20, 12)));
  CHECK(a.sizes() == at::IntArrayRef({1, 32, args.vocab_size}));
}

// Inputs for SwiGLU tests: normal values, with the extremes where sigmoid saturates or exp clamps.
at::Tensor swiglu_input(int64_t n) {
  auto x = 4 * at::randn({n});
  const float extremes[] = {0.0f, -0.0f, 1e-30f, -100.0f, 100.0f, -90.0f, 89.0f, 20.0f, -20.0f};
  for (int64_t i = 0; i < n && i < 9; ++i) x[i] = extremes[i];
  return x;
}

TEST_CASE("model: fused SwiGLU equals ATen's silu(a) * b, values and gradients", "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  for (int64_t n : {1, 7, 8, 9, 23, 1000, 70001}) {  // tails of every length; 70001 spans tasks
    INFO("n=" << n);
    auto a = swiglu_input(n).requires_grad_(), b = at::randn({n}).requires_grad_();
    auto grad = at::randn({n});
    auto expected = at::silu(a) * b;
    auto expected_grads = torch::autograd::grad({expected}, {a, b}, {grad});
    auto got = fused_swiglu(a, b);
    auto got_grads = torch::autograd::grad({got}, {a, b}, {grad});
    CHECK(at::allclose(got, expected, 1e-6, 1e-6));
    CHECK(at::allclose(got_grads[0], expected_grads[0], 1e-5, 1e-6));
    CHECK(at::allclose(got_grads[1], expected_grads[1], 1e-6, 1e-6));
  }
}

TEST_CASE(
    "model: fused SwiGLU, at each vector width, is as close to a float64 reference as ATen's "
    "float32",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(5);
    auto a = swiglu_input(50000).requires_grad_(), b = at::randn({50000});
    auto grad = at::randn({50000});
    auto reference = at::silu(a.to(at::kDouble)) * b.to(at::kDouble);
    auto reference_da = torch::autograd::grad({reference}, {a}, {grad.to(at::kDouble)})[0];
    // Relative to the reference's magnitude, so that large and small elements count alike; below
    // 1e-6 absolute, since where exp clamps (a < -87.3) silu is about 1e-36 instead of smaller.
    auto error = [](const at::Tensor& got, const at::Tensor& want) {
      return ((got.to(at::kDouble) - want).abs() / (want.abs() + 1e-6)).max().item<double>();
    };
    auto measure = [&](const at::Tensor& out) {
      auto da = torch::autograd::grad({out}, {a}, {grad})[0];
      return std::make_pair(error(out, reference), error(da, reference_da));
    };
    auto [aten_out, aten_da] = measure(at::silu(a) * b);
    auto [fused_out, fused_da] = measure(fused_swiglu(a, b));
    INFO("max relative error against float64: ATen out "
         << aten_out << " da " << aten_da << ", fused out " << fused_out << " da " << fused_da);
    CHECK(fused_out <= 2 * aten_out);
    CHECK(fused_da <= 2 * aten_da);
  }
}

TEST_CASE(
    "model: fused SwiGLU, at each vector width, is bitwise the same on 1 and 2 intra-op threads",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(0);
    auto a = at::randn({4, 300, 211}).requires_grad_(),
         b = at::randn({4, 300, 211}).requires_grad_();
    auto grad = at::randn({4, 300, 211});
    auto run = [&](int threads) {
      const int previous = at::get_num_threads();
      at::set_num_threads(threads);
      auto out = fused_swiglu(a, b);
      auto grads = torch::autograd::grad({out}, {a, b}, {grad});
      at::set_num_threads(previous);
      return std::vector<at::Tensor>{out, grads[0], grads[1]};
    };
    auto one = run(1), two = run(2);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("output " << i << " (0 = out, then da, db)");
      CHECK(at::equal(one[i], two[i]));
    }
  }
}

at::Tensor aten_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

TEST_CASE("model: fused RMSNorm equals ATen's formula, values and gradients", "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  torch::manual_seed(0);
  for (int64_t C : {8, 24, 256}) {
    for (int64_t rows : {0, 1, 5, 64, 65, 300}) {  // no rows, one chunk, several, a partial one
      INFO("rows=" << rows << " C=" << C);
      auto x = (3 * at::randn({rows, C})).requires_grad_();
      auto weight = (1 + 0.1 * at::randn({C})).requires_grad_();
      auto grad = at::randn({rows, C});
      auto expected = aten_rms_norm(x, weight, 1e-5);
      auto expected_grads = torch::autograd::grad({expected}, {x, weight}, {grad});
      auto got = fused_rms_norm(x, weight, 1e-5);
      auto got_grads = torch::autograd::grad({got}, {x, weight}, {grad});
      CHECK(at::allclose(got, expected, 1e-5, 1e-6));
      CHECK(at::allclose(got_grads[0], expected_grads[0], 1e-4, 1e-5));
      CHECK(at::allclose(got_grads[1], expected_grads[1], 1e-4, 1e-5));
    }
  }
}

TEST_CASE(
    "model: fused RMSNorm, at each vector width, is as close to a float64 reference as ATen's "
    "float32",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(6);
    auto x = (3 * at::randn({2048, 256})).requires_grad_();
    auto weight = (1 + 0.1 * at::randn({256})).requires_grad_();
    auto grad = at::randn({2048, 256});
    auto reference = aten_rms_norm(x.to(at::kDouble), weight.to(at::kDouble), 1e-5);
    auto reference_grads = torch::autograd::grad({reference}, {x, weight}, {grad.to(at::kDouble)});
    // In float ulps of the reference's largest element: dw's elements are sums of 2048 rows (about
    // 100), where ATen's error is half an ulp and any other order of adding is likely one.
    auto error = [](const at::Tensor& got, const at::Tensor& want) {
      const double ulp = std::ldexp(1.0, std::ilogb(want.abs().max().item<double>()) - 23);
      return (got.to(at::kDouble) - want).abs().max().item<double>() / ulp;
    };
    auto measure = [&](const at::Tensor& out) {
      auto grads = torch::autograd::grad({out}, {x, weight}, {grad});
      return std::vector<double>{error(out, reference), error(grads[0], reference_grads[0]),
                                 error(grads[1], reference_grads[1])};
    };
    auto aten = measure(aten_rms_norm(x, weight, 1e-5));
    auto fused = measure(fused_rms_norm(x, weight, 1e-5));
    for (size_t i = 0; i < aten.size(); ++i) {
      INFO("output " << i << " (0 = y, then dx, dw): max error against float64, in ulps: ATen "
                     << aten[i] << ", fused " << fused[i]);
      CHECK(fused[i] <= std::max(2 * aten[i], 1.0));
    }
  }
}

TEST_CASE(
    "model: fused RMSNorm, at each vector width, is bitwise the same on 1 and 2 intra-op threads",
    "[model]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  for (VectorIsa isa : test::vector_isas_here()) {
    INFO("vector width " << test::isa_name(isa));
    test::VectorIsaScope width(isa);
    torch::manual_seed(0);
    auto x = at::randn({4, 333, 256}).requires_grad_();
    auto weight = at::randn({256}).requires_grad_();
    auto grad = at::randn({4, 333, 256});
    auto run = [&](int threads) {
      const int previous = at::get_num_threads();
      at::set_num_threads(threads);
      auto out = fused_rms_norm(x, weight, 1e-5);
      auto grads = torch::autograd::grad({out}, {x, weight}, {grad});
      at::set_num_threads(previous);
      return std::vector<at::Tensor>{out, grads[0], grads[1]};
    };
    auto one = run(1), two = run(2);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("output " << i << " (0 = y, then dx, dw)");
      CHECK(at::equal(one[i], two[i]));
    }
  }
}

// torchtitan's initialization on the debug model, checked statistically for every parameter:
// the sample std within 5 standard errors of the specified std, the mean within 5 standard
// errors of 0, the truncation bounds respected, and the norms exactly ones.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>

#include "catch_torch.h"
#include "llama3/transformer.h"
#include "models/registry.h"

using namespace titan;

namespace {

struct Spec {
  double std;    // std of the samples (after truncation)
  double bound;  // |w| <= bound
};

// What torchtitan specifies for `name` in a model with `args`.
Spec expected_init(const std::string& name, const ModelArgs& args) {
  if (name == "tok_embeddings.weight") return {1.0, INFINITY};
  if (name == "output.weight") {
    // trunc_normal(std = dim^-0.5, a = -3 std, b = 3 std): truncation at 3 sigma shrinks the std
    // by sqrt(1 - 6 phi(3) / (Phi(3) - Phi(-3))) = 0.98658.
    const double s = 1.0 / std::sqrt(static_cast<double>(args.dim));
    return {s * 0.986580, 3 * s};
  }
  auto layer = std::stoi(name.substr(name.find('.') + 1));
  for (const char* key : {".wo.", ".w2.", ".w3."}) {
    if (name.find(key) != std::string::npos) return {0.02 / std::sqrt(2.0 * (layer + 1)), 2.0};
  }
  return {0.02, 2.0};  // wq, wk, wv, w1
}

}  // namespace

TEST_CASE("init: every debugmodel weight follows torchtitan's init statistics", "[init]") {
  torch::manual_seed(2024);
  ModelArgs args = flavor_args("llama3", "debugmodel");
  args.max_seq_len = 8;
  Transformer model(args);
  model->init_weights();
  int checked = 0, norms = 0;
  for (auto& p : model->named_parameters()) {
    const auto& name = p.key();
    const auto w = p.value().detach().to(at::kDouble);
    INFO(name);
    if (name.find("norm") != std::string::npos) {
      CHECK(at::equal(p.value(), at::ones_like(p.value())));
      ++norms;
      continue;
    }
    const Spec spec = expected_init(name, args);
    const double n = static_cast<double>(w.numel());
    const double std = w.std().item<double>(), mean = w.mean().item<double>();
    const double std_error = spec.std / std::sqrt(2.0 * n);  // of a sample std
    INFO(fmt::format("std {:.6f} expected {:.6f} (5 SE = {:.2g}), mean {:.3g}", std, spec.std,
                     5 * std_error, mean));
    CHECK(std::abs(std - spec.std) <= 5 * std_error);
    CHECK(std::abs(mean) <= 5 * spec.std / std::sqrt(n));
    CHECK(w.abs().max().item<double>() <= spec.bound);
    ++checked;
  }
  CHECK(checked == 2 + 6 * 7);  // embedding, output, 7 matrices per layer
  CHECK(norms == 1 + 6 * 2);
}

TEST_CASE("init: the output layer's truncation at 3 sigma is active, not just nominal", "[init]") {
  torch::manual_seed(7);
  auto w = at::empty({1 << 20});
  trunc_normal_(w, 0.0, 1.0, -3.0, 3.0);
  CHECK(w.abs().max().item<double>() <= 3.0);
  CHECK(w.abs().max().item<double>() >
        2.9);  // samples reach the bound: truncated, not clipped away
  CHECK(w.std().item<double>() == Approx(0.98658).margin(0.002));
}

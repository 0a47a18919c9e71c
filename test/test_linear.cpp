// The linear layers on oneDNN's sgemm (debug.cpu_linear = "onednn", model/linear.h): as close to
// float64 as ATen's matmul, the same bits at any thread count, seen as one op, and chosen, named
// and refused through the binary.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/fingerprint_reader.h"
#include "catch_torch.h"
#include "model/kernels.h"
#include "model/linear.h"
#include "model/observed_op.h"
#include "test_util.h"
#include "util/autocast.h"
#include "util/onednn_sgemm.h"

using namespace titan;

namespace {

void require_onednn() {
  if (!onednn_library().loaded)
    TITAN_SKIP("SKIPPED: oneDNN is not installed here (" + onednn_library().error + ")");
}

// Sets the linear layers' backend for a scope, then puts ATen's back.
struct LinearBackendScope {
  explicit LinearBackendScope(LinearBackend backend) { set_linear_backend(backend); }
  ~LinearBackendScope() { set_linear_backend(LinearBackend::kAten); }
};

struct LinearResult {
  at::Tensor y, dx, dw;
};

// y = x W^T for `layer`, and the gradients of sum(y * g).
LinearResult run_layer(torch::nn::Linear& layer, const at::Tensor& x_in, const at::Tensor& g) {
  layer->weight.mutable_grad() = at::Tensor();
  auto x = x_in.detach().clone().requires_grad_(true);
  auto y = linear(layer, x);
  (y * g).sum().backward();
  return {y.detach(), x.grad(), layer->weight.grad().clone()};
}

double max_abs(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Shape {
  std::vector<int64_t> x;  // (..., in)
  int64_t out;
};

// The debug model's layers at a small batch, and odd sizes that leave every GEMM edge ragged.
const std::vector<Shape> kShapes = {
    {{2, 64, 256}, 768}, {{2, 64, 768}, 256}, {{128, 256}, 2048}, {{3, 33, 40}, 24}, {{1, 7}, 5}};

}  // namespace

TEST_CASE(
    "linear: oneDNN's output and both gradients are as close to float64 as ATen's matmul, "
    "for the debug model's shapes and ragged ones",
    "[model][linear]") {
  require_onednn();
  torch::manual_seed(0);
  for (const Shape& shape : kShapes) {
    const int64_t in = shape.x.back();
    INFO("x " << at::IntArrayRef(shape.x) << ", out " << shape.out);
    torch::nn::Linear layer(torch::nn::LinearOptions(in, shape.out).bias(false));
    auto x = at::randn(shape.x);
    auto y_sizes = shape.x;
    y_sizes.back() = shape.out;
    auto g = at::randn(y_sizes);
    const LinearResult aten = run_layer(layer, x, g);
    LinearResult onednn;
    {
      LinearBackendScope scope(LinearBackend::kOnednn);
      onednn = run_layer(layer, x, g);
      // The layer ran oneDNN's kernel, not ATen's.
      CHECK(at::equal(onednn.y, onednn_linear(x, layer->weight).detach()));
    }
    // The float64 reference, by hand.
    auto x64 = x.to(at::kDouble).reshape({-1, in});
    auto w64 = layer->weight.detach().to(at::kDouble);
    auto g64 = g.to(at::kDouble).reshape({-1, shape.out});
    const at::Tensor want[] = {x64.mm(w64.t()).view(y_sizes), g64.mm(w64).view(shape.x),
                               g64.t().mm(x64)};
    const at::Tensor aten_got[] = {aten.y, aten.dx, aten.dw};
    const at::Tensor onednn_got[] = {onednn.y, onednn.dx, onednn.dw};
    const char* names[] = {"y", "dx", "dw"};
    const int64_t summed[] = {in, shape.out, x64.size(0)};  // the length of each dot product
    for (int i = 0; i < 3; ++i) {
      INFO(names[i]);
      REQUIRE(onednn_got[i].sizes() == want[i].sizes());
      const double scale = want[i].abs().max().item<double>();
      const double aten_error = max_abs(aten_got[i], want[i]) / scale;
      const double onednn_error = max_abs(onednn_got[i], want[i]) / scale;
      INFO("relative error: ATen " << aten_error << ", oneDNN " << onednn_error);
      // Within twice ATen's error, or within a float32 sum's typical rounding (sqrt(n) units in
      // the last place): which of two blockings lands nearer float64 on one matrix is chance
      // (oneDNN's AVX-512 kernel sums dx's 2048 terms in another order than OpenBLAS).
      const double typical_rounding = std::sqrt(static_cast<double>(summed[i])) * 0x1p-24;
      CHECK(onednn_error <= std::max(2 * aten_error, typical_rounding));
      CHECK(onednn_error < 1e-5);
    }
  }
}

TEST_CASE("linear: oneDNN gives the same bits at 1 and 2 threads, and from call to call",
          "[model][linear]") {
  require_onednn();
  torch::manual_seed(1);
  LinearBackendScope scope(LinearBackend::kOnednn);
  const int threads = at::get_num_threads();
  for (const Shape& shape : kShapes) {
    INFO("x " << at::IntArrayRef(shape.x) << ", out " << shape.out);
    torch::nn::Linear layer(torch::nn::LinearOptions(shape.x.back(), shape.out).bias(false));
    auto x = at::randn(shape.x);
    auto y_sizes = shape.x;
    y_sizes.back() = shape.out;
    auto g = at::randn(y_sizes);
    at::set_num_threads(1);
    const LinearResult one = run_layer(layer, x, g);
    at::set_num_threads(2);
    const LinearResult two = run_layer(layer, x, g);
    const LinearResult again = run_layer(layer, x, g);
    at::set_num_threads(threads);
    CHECK(at::equal(one.y, two.y));
    CHECK(at::equal(one.dx, two.dx));
    CHECK(at::equal(one.dw, two.dw));
    CHECK(at::equal(two.dw, again.dw));
  }
}

TEST_CASE(
    "linear: the ATen kernel is the layer's own forward, and oneDNN is taken only for float32 on "
    "the CPU without autocast",
    "[model][linear]") {
  torch::manual_seed(2);
  torch::nn::Linear layer(torch::nn::LinearOptions(40, 24).bias(false));
  auto x = at::randn({3, 5, 40});
  CHECK(linear_kernel_for(at::kFloat, at::kCPU) == LinearKernel::kAten);
  CHECK(at::equal(linear(layer, x), layer(x)));
  LinearBackendScope scope(LinearBackend::kOnednn);
  CHECK(linear_kernel_for(at::kFloat, at::kCPU) == LinearKernel::kOnednn);
  CHECK(linear_kernel_for(at::kDouble, at::kCPU) == LinearKernel::kAten);
  CHECK(linear_kernel_for(at::kBFloat16, at::kCPU) == LinearKernel::kAten);
  {
    AutocastScope autocast(c10::kCPU, true, at::kBFloat16);
    CHECK(linear_kernel_for(at::kFloat, at::kCPU) == LinearKernel::kAten);
  }
  ModelArgs args;
  CHECK(model_kernels(args, at::kCPU).linear == LinearKernel::kOnednn);
  CHECK(model_kernels(args, at::kCPU, at::kBFloat16).linear == LinearKernel::kAten);
  CHECK(linear_kernel_name(LinearKernel::kAten) == "aten");
  if (onednn_library().loaded) {
    CHECK(linear_kernel_name(LinearKernel::kOnednn) == "onednn " + onednn_library().version);
  }
}

TEST_CASE(
    "linear: observers see oneDNN's linear as one op, titan::linear, which runs again on "
    "float64 inputs through ATen",
    "[model][linear]") {
  require_onednn();
  torch::manual_seed(3);
  LinearBackendScope scope(LinearBackend::kOnednn);
  auto x = at::randn({4, 9, 40}), w = at::randn({24, 40});
  const at::Tensor y = onednn_linear(x, w);
  CHECK(is_observed_op("titan::linear"));
  CHECK(at::equal(run_observed_op("titan::linear", {x, w}), y));
  const at::Tensor y64 = run_observed_op("titan::linear", {x.to(at::kDouble), w.to(at::kDouble)});
  CHECK(y64.scalar_type() == at::kDouble);
  CHECK(at::equal(y64, at::linear(x.to(at::kDouble), w.to(at::kDouble))));
  CHECK_THROWS_WITH(onednn_linear(x.to(at::kDouble), w.to(at::kDouble)),
                    Catch::Contains("needs float32 CPU tensors"));
  CHECK_THROWS_WITH(onednn_linear(x, at::randn({24, 41})), Catch::Contains("must match"));
}

TEST_CASE(
    "linear: debug.cpu_linear = onednn trains, names oneDNN in the start-up line and "
    "fingerprint.log, hashes apart from aten and stays within 1e-4 of its losses",
    "[linear][cli]") {
  require_onednn();
  const std::string dir = test::temp_dir("linear_onednn");
  const std::string run =
      "--model.flavor tiny --training.seq_len 32 --training.local_batch_size 2 --training.steps 4 "
      "--training.device cpu --debug.seed 4 --debug.fingerprint_freq 1 --job.dump_folder ";
  auto aten = test::run_titan(run + dir + "/aten");
  auto onednn = test::run_titan(run + dir + "/onednn --debug.cpu_linear onednn");
  INFO(aten.output << onednn.output);
  REQUIRE(aten.exit_code == 0);
  REQUIRE(onednn.exit_code == 0);
  const std::string name = "onednn " + onednn_library().version;
  CHECK_THAT(aten.output, Catch::Contains(", linear aten\n"));
  CHECK_THAT(onednn.output, Catch::Contains(", linear " + name + "\n"));
  const std::string a = test::read_text(dir + "/aten/fingerprint.log");
  const std::string b = test::read_text(dir + "/onednn/fingerprint.log");
  CHECK_THAT(a, !Catch::Contains("\nlinear_kernel "));
  CHECK_THAT(b, Catch::Contains("\nlinear_kernel " + name + "\n"));
  const auto fa = read_fingerprint_log(dir + "/aten/fingerprint.log");
  const auto fb = read_fingerprint_log(dir + "/onednn/fingerprint.log");
  REQUIRE(fa.header_value("config_hash") != nullptr);
  REQUIRE(fb.header_value("config_hash") != nullptr);
  CHECK(*fa.header_value("config_hash") != *fb.header_value("config_hash"));
  REQUIRE(fa.steps.size() == 4);
  REQUIRE(fb.steps.size() == 4);
  // Close losses. Not different bits: on Debian's libtorch 2.6, ATen's float32 matmul is itself
  // oneDNN's sgemm, and the two runs are bitwise equal there (on 1.13, OpenBLAS, they part).
  for (size_t i = 0; i < fa.steps.size(); ++i) {
    INFO("step " << i + 1 << ": " << fa.steps[i].loss << " vs " << fb.steps[i].loss);
    CHECK(std::abs(fa.steps[i].loss - fb.steps[i].loss) <= 1e-4 * std::abs(fa.steps[i].loss));
  }
}

TEST_CASE(
    "linear: a cpu_linear value not known, or onednn with batch invariance, is refused at "
    "start with exit 2, naming the key",
    "[linear][cli]") {
  const std::string dir = test::temp_dir("linear_refused");
  const std::string run =
      "--model.flavor tiny --training.seq_len 32 --training.steps 1 --training.device cpu "
      "--job.dump_folder ";
  auto unknown = test::run_titan(run + dir + "/unknown --debug.cpu_linear mkl");
  INFO(unknown.output);
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("debug.cpu_linear") &&
                                 Catch::Contains("allowed values: \"aten\", \"onednn\""));
  auto invariant = test::run_titan(run + dir +
                                   "/invariant --debug.cpu_linear onednn --debug.batch_invariant "
                                   "true");
  INFO(invariant.output);
  CHECK(invariant.exit_code == 2);
  CHECK_THAT(invariant.output,
             Catch::Contains("debug.batch_invariant") && Catch::Contains("debug.cpu_linear"));
  CHECK_FALSE(std::filesystem::exists(dir + "/unknown"));
  CHECK_FALSE(std::filesystem::exists(dir + "/invariant"));
}

// A Hugging Face checkpoint against an independent PyTorch Llama in transformers' conventions
// (scripts/reference/hf_llama_reference.py; its files in test/data/): titan-train's logits from
// the imported weights, the per-layer report through compare, and `titan-train export --hf`.
//
// Tolerance: logits within 1e-5 x max |reference logits| (float32 on both sides, different
// kernels and summation orders, and RoPE rotated as complex products here against
// cos/sin/rotate-half there). Measured (libtorch 1.13 against PyTorch 1.13, CPU): run with -s.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>

#include "analysis/compare.h"
#include "catch_torch.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/model_checkpoint.h"
#include "llama3/transformer.h"
#include "metrics/numerics_log.h"
#include "reference_state.h"
#include "test_util.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

constexpr double kLogitTolerance = 1e-5;

std::string data(const std::string& name) { return test::source_dir() + "/test/data/" + name; }

bool reference_present() {
  return fs::exists(data("hf_llama_reference.bin")) && fs::exists(data("hf_tiny/config.json"));
}

Transformer model_from(const std::vector<NamedTensor>& tensors) {
  Transformer model(test::tiny_model_args());
  check_parameters_match(*model, tensors, "hf_tiny", "");
  load_parameters(*model, tensors);
  return model;
}

double relative_max_diff(const at::Tensor& got, const at::Tensor& expected) {
  const double diff = (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
  return diff / std::max(expected.abs().max().item<double>(), 1e-30);
}

// Records every stage's output statistics, as debug.numerics_trace "blocks" does.
class StageStats : public ForwardObserver {
 public:
  void block_starting(int64_t) override {}
  void stage_output(ForwardStage stage, int64_t layer, at::Tensor& output) override {
    const char* names[] = {"tok_embeddings", "", "norm", "output"};
    NumericsEntry e;
    e.name = stage == ForwardStage::kBlock ? fmt::format("layers.{}", layer)
                                           : names[static_cast<int>(stage)];
    e.stats = tensor_stats(output.detach());
    step.forward.push_back(e);
  }
  NumericsStep step;
};

// Writes what a one-step titan-train run with debug.numerics_trace "blocks" would about the
// reference's batch into `dir`: numerics.log (forward outputs, gradients in backward order) and
// a fingerprint.log with the loss (the reference's header keys, so that compare has no header
// noise to report but the versions).
void write_titan_trace(Transformer& model, const test::ReferenceState& ref,
                       const std::string& dir) {
  auto observer = std::make_shared<StageStats>();
  observer->step.step = 1;
  model->set_forward_observer(observer);
  const auto logits = model->forward(ref.tensor("inputs"));
  model->set_forward_observer(nullptr);
  const auto loss = at::cross_entropy_loss(logits.flatten(0, 1), ref.tensor("targets").flatten());
  loss.backward();
  auto params = model->named_parameters();
  for (auto it = params.end(); it != params.begin();) {
    --it;
    NumericsEntry e;
    e.kind = NumericsKind::kGradient;
    e.name = it->key();
    e.stats = tensor_stats(it->value().grad());
    observer->step.gradients.push_back(e);
  }
  fs::create_directories(dir);
  test::write_text(dir + "/numerics.log",
                   numerics_header("blocks", 1) + format_numerics_step(observer->step, false));
  std::string fingerprint = test::read_text(data("hf_reference_run/fingerprint.log"));
  fingerprint = fingerprint.substr(0, fingerprint.find("step 1 "));
  const double value = loss.item<double>();
  test::write_text(dir + "/fingerprint.log",
                   fingerprint + fmt::format("step 1 loss {:a} ({:.9g}) grad_norm 0x0p+0 (0) lr "
                                             "0x0p+0 tokens {}\n",
                                             value, value, ref.tensor("inputs").numel()));
}

}  // namespace

TEST_CASE("hf: logits from an HF checkpoint match transformers' conventions to 1e-5", "[hf]") {
  if (!reference_present()) TITAN_SKIP("test/data/hf_* is absent: scripts/reference/generate.sh");
  const auto ref = test::load_reference_state(data("hf_llama_reference.bin"));
  HfLoadReport report;
  auto model =
      model_from(load_hf_checkpoint(data("hf_tiny"), test::tiny_model_args(), at::kFloat, &report));
  CHECK(report.tied);
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(ref.tensor("inputs"));
  const double rel = relative_max_diff(logits, ref.tensor("logits"));
  const auto loss = at::cross_entropy_loss(logits.flatten(0, 1), ref.tensor("targets").flatten());
  const double loss_rel = std::fabs(loss.item<double>() - ref.tensor("loss").item<double>()) /
                          std::fabs(ref.tensor("loss").item<double>());
  WARN(fmt::format("hf reference: logits relative difference {:.3g}, loss {:.3g}", rel, loss_rel));
  CHECK(rel <= kLogitTolerance);
  CHECK(loss_rel <= kLogitTolerance);
  // The break it guards against: q/k taken in Hugging Face's row order unpermuted.
  auto raw = load_hf_checkpoint(data("hf_tiny"), test::tiny_model_args(), at::kFloat);
  for (auto& t : raw) {
    if (const int64_t heads = permuted_heads(t.name, test::tiny_model_args()))
      t.tensor = permute_to_hf(t.tensor, heads);
  }
  CHECK(relative_max_diff(model_from(raw)->forward(ref.tensor("inputs")), ref.tensor("logits")) >
        1e-2);
}

TEST_CASE("hf: compare names the first block where titan-train and the reference part",
          "[hf][compare]") {
  if (!reference_present()) TITAN_SKIP("test/data/hf_* is absent: scripts/reference/generate.sh");
  const auto ref = test::load_reference_state(data("hf_llama_reference.bin"));
  const auto dir = test::temp_dir("hf_layer_report");
  const auto tensors = load_hf_checkpoint(data("hf_tiny"), test::tiny_model_args(), at::kFloat);
  auto model = model_from(tensors);
  write_titan_trace(model, ref, dir + "/good");
  const std::string reference_run = data("hf_reference_run");
  const Comparison good = compare_runs(dir + "/good", reference_run, 1e-5);
  CHECK_FALSE(good.diverged());
  CHECK(good.numerics.compared);
  CHECK_FALSE(good.numerics.step);
  // Bitwise, every line differs (the reference writes checksum 0): no report without tolerance.
  CHECK(compare_runs(dir + "/good", reference_run, std::nullopt).numerics.forward->a->name ==
        "tok_embeddings");

  // layers.1's wk left in Hugging Face's row order: the embeddings and layers.0 still agree,
  // layers.1 is named first. The gradients part from the first in backward order (output.weight:
  // its input, layers.1's output, already differs), so the forward is what locates the fault.
  auto broken = tensors;
  for (auto& t : broken) {
    if (t.name == "layers.1.attention.wk.weight") t.tensor = permute_to_hf(t.tensor, 2);
  }
  auto bad_model = model_from(broken);
  write_titan_trace(bad_model, ref, dir + "/bad");
  const Comparison bad = compare_runs(dir + "/bad", reference_run, 1e-5);
  CHECK(bad.diverged());  // the loss too
  REQUIRE(bad.numerics.forward);
  CHECK(bad.numerics.forward->a->name == "layers.1");
  REQUIRE(bad.numerics.gradient);
  CHECK(bad.numerics.gradient->a->name == "output.weight");
  auto cli = test::run_titan("compare " + dir + "/bad " + reference_run + " --tolerance 1e-5");
  CHECK(cli.exit_code == 1);
  CHECK_THAT(cli.output, Catch::Contains("numerics.log: first difference beyond tolerance 1e-05 "
                                         "(mean and max_abs; checksums not compared) at step 1"));
  CHECK_THAT(cli.output, Catch::Contains("first tensor (forward order): fwd layers.1"));
  cli = test::run_titan("compare " + dir + "/good " + reference_run + " --tolerance 1e-5");
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.output, Catch::Contains("numerics.log: no difference beyond tolerance 1e-05"));
}

TEST_CASE("hf: titan-train export --hf writes a folder load_hf_checkpoint reads back bitwise",
          "[hf][checkpoint]") {
  const auto dir = test::temp_dir("hf_export");
  REQUIRE(test::run_titan(test::tiny_run(dir, 2, "--checkpoint.enable")).exit_code == 0);
  const std::string step = dir + "/checkpoint/step-2";
  const auto model = parse_safetensors(test::read_text(step + "/model.safetensors"), "model");
  auto r = test::run_titan("export " + dir + "/checkpoint -o " + dir + "/hf --hf");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("as a Hugging Face Llama checkpoint: 2 files, float32"));
  ModelArgs args = test::tiny_model_args();
  args.max_seq_len = 16;  // training.seq_len of the run
  const auto loaded = load_hf_checkpoint(dir + "/hf", args, at::kFloat);
  REQUIRE(loaded.size() == model.tensors.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    INFO(loaded[i].name);
    CHECK(same_tensor_bits(loaded[i].tensor, model.find(loaded[i].name)));
  }
  CHECK_THAT(test::read_text(dir + "/hf/config.json"),
             Catch::Contains("\"max_position_embeddings\": 16"));
  const std::string before = test::read_text(dir + "/hf/model.safetensors");
  r = test::run_titan("export " + step + " -o " + dir + "/hf --hf --dtype bfloat16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(dir + "/hf: exists"));
  CHECK(test::read_text(dir + "/hf/model.safetensors") == before);
  r = test::run_titan("export " + step + " -o " + dir + "/hf --hf --dtype float16 --force");
  CHECK(r.exit_code == 0);
  CHECK_THAT(test::read_text(dir + "/hf/config.json"), Catch::Contains("\"float16\""));
  test::write_text(dir + "/hf/README.md", "mine");
  r = test::run_titan("export " + step + " -o " + dir + "/hf --hf --force");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not replaced even with --force"));
  r = test::run_titan("export " + step + " -o " + step + "/hf --hf");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("the checkpoint being exported"));
  CHECK_FALSE(fs::exists(step + "/hf"));
  r = test::run_titan("export " + step + " -o " + dir + "/x --hf --dtype float64");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("use float32, bfloat16 or float16"));
  r = test::run_titan("export " + step + " -o " + dir + "/x.safetensors --dtype float16");
  CHECK(r.exit_code == 0);  // checkpoint.export_dtype's choices, torchtitan's three, either layout
}

// numerics.log: a deliberate 1-ulp perturbation of one block at step 2 is located at step 2, that
// block, and with "ops" that op; the trace is exact and diffable and changes nothing computed.
#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "analysis/compare.h"
#include "catch_torch.h"
#include "config/loader.h"
#include "fault_injection.h"
#include "instruments/numerics_trace.h"
#include "metrics/numerics_log.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace titan;

namespace {

Config traced_config(const std::string& dir, const std::string& level) {
  Config c;
  c.job.dump_folder = dir;
  c.model.flavor = "tiny";
  c.training.local_batch_size = 2;
  c.training.seq_len = 32;
  c.training.steps = 3;
  c.training.device = DeviceChoice::kCpu;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = AcMode::kNone;
  c.debug.seed = 5;
  c.debug.numerics_trace = parse_enum<NumericsTrace>(level).value();
  return c;
}

NumericsEntry tensor_entry(NumericsKind kind, const std::string& name, TensorStats stats) {
  NumericsEntry e;
  e.kind = kind;
  e.name = name;
  e.stats = stats;
  return e;
}

// An op of layers.0 with one hashed f32[2] output.
NumericsEntry op_entry(int64_t position, const std::string& op, uint64_t checksum) {
  NumericsEntry e;
  e.kind = NumericsKind::kOp;
  e.name = "layers.0";
  e.position = position;
  e.op = op;
  OpOutput out;
  out.dtype = "f32";
  out.sizes = {2};
  out.hashed = true;
  out.checksum = checksum;
  out.max_abs = 1.0;
  e.outputs = {out};
  return e;
}

// Trains a traced run whose block `layer` output gets nextafter(x, x) (ulps 0, unchanged) or one
// ulp up (ulps 1) at step 2.
void train_perturbed(const std::string& dir, const std::string& level, int64_t layer, int ulps) {
  auto run = test::start_run(traced_config(dir, level));
  REQUIRE(run->run->instrument<NumericsTracer>() != nullptr);
  run->run->instrument<NumericsTracer>()->set_block_output_hook(
      test::ulp_perturbation(2, layer, ulps));
  run->trainer->train();
}

}  // namespace

TEST_CASE("numerics trace: a 1-ulp perturbation of layers.1 at step 2 is located there",
          "[numerics][compare]") {
  auto dir = test::temp_dir("nt_perturb_blocks");
  train_perturbed(dir + "/a", "blocks", 1, 0);
  train_perturbed(dir + "/b", "blocks", 1, 1);
  Comparison c = compare_runs(dir + "/a", dir + "/b", std::nullopt);
  REQUIRE(c.first_difference);
  CHECK(c.first_difference->step == 2);
  // One ulp in one block can round away in the mean loss and the norm; the step's parameter
  // checksum is the field that always sees it.
  CHECK_THAT(c.first_difference->field,
             Catch::Equals("loss") || Catch::Equals("grad_norm") || Catch::Equals("params"));
  REQUIRE(c.numerics.step);
  CHECK(*c.numerics.step == 2);
  REQUIRE(c.numerics.forward);
  REQUIRE(c.numerics.forward->a);
  CHECK(c.numerics.forward->a->name == "layers.1");
  CHECK(c.numerics.forward->a->kind == NumericsKind::kForward);
  CHECK(c.numerics.forward->a->stats.checksum != c.numerics.forward->b->stats.checksum);
  CHECK_FALSE(c.numerics.op);  // blocks level: no ops recorded
  CHECK_THAT(format_comparison_text(c),
             Catch::Contains("first difference at step 2") && Catch::Contains("fwd layers.1"));
}

TEST_CASE("numerics trace: with ops the perturbation is located at the op inside the block",
          "[numerics][compare]") {
  auto dir = test::temp_dir("nt_perturb_ops");
  train_perturbed(dir + "/a", "ops", 0, 0);
  train_perturbed(dir + "/b", "ops", 0, 1);
  Comparison c = compare_runs(dir + "/a", dir + "/b", std::nullopt);
  REQUIRE(c.numerics.step);
  CHECK(*c.numerics.step == 2);
  REQUIRE(c.numerics.op);
  REQUIRE(c.numerics.op->a);
  CHECK(c.numerics.op->a->name == "layers.0");
  CHECK(c.numerics.op->a->op == "aten::nextafter");
  REQUIRE(c.numerics.forward);
  CHECK(c.numerics.forward->a->name == "layers.0");
  // The ops before it agree: the op's position is the perturbation's, after the block's own ops.
  auto log = read_numerics_log(dir + "/a/numerics.log");
  int64_t last_block_op = -1;
  for (const auto& e : log.steps.at(0).forward) {
    if (e.kind == NumericsKind::kOp && e.name == "layers.0") last_block_op = e.position;
  }
  CHECK(c.numerics.op->a->position > 0);
  CHECK(c.numerics.op->a->position < last_block_op + 10);
}

TEST_CASE("numerics trace: the same run twice writes byte-identical numerics.log in fixed order",
          "[numerics]") {
  auto dir = test::temp_dir("nt_same");
  for (const char* run : {"/a", "/b"}) {
    Config c = traced_config(dir + run, "ops");
    c.training.global_batch_size = 4;  // two micro-batches
    c.debug.numerics_freq = 2;
    test::start_run(c)->trainer->train();
  }
  auto a = test::read_text(dir + "/a/numerics.log");
  CHECK(a == test::read_text(dir + "/b/numerics.log"));
  auto file = parse_numerics_log(a, "a");
  CHECK(file.level == "ops");
  REQUIRE(file.steps.size() == 1);  // freq 2 over 3 steps: step 2 only
  CHECK(file.steps[0].step == 2);
  std::vector<std::string> forward;
  for (const auto& e : file.steps[0].forward) {
    if (e.kind == NumericsKind::kForward)
      forward.push_back(fmt::format("{}:{}", e.micro_batch, e.name));
  }
  CHECK(forward == std::vector<std::string>{"0:tok_embeddings", "0:layers.0", "0:layers.1",
                                            "0:norm", "0:output", "1:tok_embeddings", "1:layers.0",
                                            "1:layers.1", "1:norm", "1:output"});
  REQUIRE(!file.steps[0].gradients.empty());
  CHECK(file.steps[0].gradients.front().name == "output.weight");  // backward order
  CHECK(file.steps[0].gradients.back().name == "tok_embeddings.weight");
  CHECK_THAT(a, Catch::Contains("\nop layers.0 ") && Catch::Contains(" aten::") &&
                    Catch::Contains(" mean 0x"));
}

TEST_CASE("numerics trace: the trace keys change nothing computed, and stay out of the hash",
          "[numerics][fingerprint]") {
  auto dir = test::temp_dir("nt_hash");
  for (auto [run, level] : {std::pair{"/none", "none"}, {"/blocks", "blocks"}, {"/ops", "ops"}}) {
    test::start_run(traced_config(dir + run, level))->trainer->train();
  }
  auto none = test::read_text(dir + "/none/fingerprint.log");
  CHECK(none == test::read_text(dir + "/blocks/fingerprint.log"));
  CHECK(none == test::read_text(dir + "/ops/fingerprint.log"));
  CHECK_FALSE(std::filesystem::exists(dir + "/none/numerics.log"));
}

TEST_CASE("numerics trace: a stale numerics.log is removed by a run without the trace",
          "[numerics]") {
  auto dir = test::temp_dir("nt_stale");
  test::start_run(traced_config(dir, "blocks"))->trainer->train();
  REQUIRE(std::filesystem::exists(dir + "/numerics.log"));
  test::start_run(traced_config(dir, "none"))->trainer->train();
  CHECK_FALSE(std::filesystem::exists(dir + "/numerics.log"));
}

TEST_CASE("numerics trace: ops under full AC with the bitwise checker equal ops without AC",
          "[numerics][ac]") {
  // The checked blocks' ops come from the checker's forward trace (one op recorder per thread).
  auto dir = test::temp_dir("nt_ac_ops");
  Config plain = traced_config(dir + "/none", "ops");
  Config checked = traced_config(dir + "/full", "ops");
  checked.activation_checkpoint.mode = AcMode::kFull;
  checked.activation_checkpoint.determinism_check = RecomputeCheck::kBitwise;
  test::start_run(plain)->trainer->train();
  test::start_run(checked)->trainer->train();
  const std::string expected = test::read_text(dir + "/none/numerics.log");
  CHECK_THAT(expected, Catch::Contains("op layers.1 ") && Catch::Contains("aten::matmul"));
  CHECK(test::read_text(dir + "/full/numerics.log") == expected);
  auto bad = test::run_titan("--debug.numerics_trace all --training.steps 1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("debug.numerics_trace"));
}

TEST_CASE("numerics.log reader: a truncated or malformed file names its line", "[numerics]") {
  NumericsStep step;
  step.step = 1;
  step.forward = {tensor_entry(NumericsKind::kForward, "tok_embeddings", {1, 0.5, 2})};
  step.gradients = {tensor_entry(NumericsKind::kGradient, "output.weight", {2, 0.25, 1})};
  const std::string good = numerics_header("blocks", 1) + format_numerics_step(step, true);
  CHECK(good == numerics_header("blocks", 1) +
                    "step 1 micro 0\nfwd tok_embeddings checksum 0000000000000001 mean 0x1p-1 "
                    "max_abs 0x1p+1\nstep 1 grads\ngrad output.weight checksum 0000000000000002 "
                    "mean 0x1p-2 max_abs 0x1p+0\nend step 1\n");
  const auto parsed = parse_numerics_log(good, "n.log");
  REQUIRE(parsed.steps.size() == 1);
  CHECK(numerics_header("blocks", 1) + format_numerics_step(parsed.steps[0], true) == good);
  auto error_of = [](const std::string& text) {
    try {
      parse_numerics_log(text, "n.log");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(good.substr(0, good.size() - 11)),
             Catch::StartsWith("n.log:7:") && Catch::Contains("no \"end step\""));
  CHECK_THAT(error_of(good.substr(0, good.size() - 3)),
             Catch::StartsWith("n.log:8:") && Catch::Contains("truncated"));
  std::string bad = good;
  bad.replace(bad.find("mean 0x"), 7, "mean zz");
  CHECK_THAT(error_of(bad), Catch::StartsWith("n.log:5:") && Catch::Contains("mean"));
}

TEST_CASE("numerics compare: traces that stop listing the same ops are named where they part",
          "[numerics][compare]") {
  auto trace = [](bool extra_op) {
    NumericsStep step;
    step.step = 1;
    step.forward = {tensor_entry(NumericsKind::kForward, "tok_embeddings", {1, 0, 1}),
                    op_entry(0, "aten::pow", 7)};
    if (extra_op) step.forward.push_back(op_entry(1, "aten::nextafter", 8));
    step.forward.push_back(tensor_entry(NumericsKind::kForward, "layers.0", {2, 0, 1}));
    step.gradients = {tensor_entry(NumericsKind::kGradient, "w", {3, 0, 1})};
    const std::string text = numerics_header("ops", 1) + format_numerics_step(step, true);
    REQUIRE_THAT(text, Catch::Contains("op layers.0 0 aten::pow f32[2]:0000000000000007:0x1p+0\n"));
    return text;
  };
  auto n =
      compare_numerics(parse_numerics_log(trace(false), "a"), parse_numerics_log(trace(true), "b"));
  REQUIRE(n.step);
  REQUIRE(n.forward);
  CHECK(n.forward->a->kind == NumericsKind::kForward);  // A's block output ...
  CHECK(n.forward->b->op == "aten::nextafter");         // ... where B still runs an op
  CHECK_FALSE(n.gradient);
  auto same =
      compare_numerics(parse_numerics_log(trace(true), "a"), parse_numerics_log(trace(true), "b"));
  CHECK_FALSE(same.step);
}

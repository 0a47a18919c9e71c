// Precision attribution (debug.precision_steps, lib/train/precision_probe.h): the op that loses
// precision is named, the fused kernels' and bf16 autocast's errors are where rounding puts them,
// the run is untouched, and bad values are refused.
#include <fmt/format.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "catch_torch.h"
#include "fault_injection.h"
#include "instruments/precision_probe.h"
#include "model/causal_attention.h"
#include "model/rmsnorm.h"
#include "model/swiglu.h"
#include "test_util.h"
#include "train/trainer.h"
#include "util/cpu_features.h"

using namespace titan;

namespace {

Config probed_config(const std::string& dir, MixedPrecision precision = MixedPrecision::kAuto) {
  Config c;
  c.job.dump_folder = dir;
  c.model.flavor = "tiny";
  c.training.local_batch_size = 2;
  c.training.seq_len = 64;
  c.training.steps = 2;
  c.training.device = DeviceChoice::kCpu;
  c.training.mixed_precision_param = precision;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = AcMode::kNone;
  c.debug.seed = 5;
  c.debug.precision_steps = {2};
  return c;
}

struct ReportedOp {
  int64_t block = -1, index = -1;
  std::string name, dtype;
  double added = -1;
};

// The "ops" entries (or the one "worst_op") of a step<N>.json, one per line as it is written.
std::vector<ReportedOp> reported_ops(const std::string& json, bool worst_only = false) {
  static const std::regex op(
      R"re(\{"micro_batch": \d+, "block": (\d+), "index": (\d+), "name": "([^"]+)", "dtype": "([^"]+)".*"added_rel_error": ([^,]+),)re");
  std::vector<ReportedOp> out;
  std::istringstream lines(json);
  std::string line;
  while (std::getline(lines, line)) {
    if (worst_only != (line.rfind("\"worst_op\": ", 0) == 0)) continue;
    std::smatch m;
    if (!std::regex_search(line, m, op)) continue;
    out.push_back({std::stoll(m[1]), std::stoll(m[2]), m[3], m[4], std::stod(m[5])});
  }
  return out;
}

double json_field(const std::string& json, const std::string& object, const std::string& key) {
  const std::regex re("\"" + object + "\": \\{[^}]*\"" + key + "\": ([-0-9.e+]+)");
  std::smatch m;
  REQUIRE(std::regex_search(json, m, re));
  return std::stod(m[1]);
}

std::string train_and_read_report(const Config& config,
                                  std::shared_ptr<BlockOutputHook> hook = nullptr) {
  auto run = test::start_run(config);
  REQUIRE(run->run->instrument<PrecisionProbe>() != nullptr);
  if (hook) run->run->instrument<PrecisionProbe>()->set_block_output_hook(hook);
  run->run->train();
  INFO(run->log.str());
  return test::read_text(config.job.dump_folder + "/precision/step2.json");
}

double max_added(const std::vector<ReportedOp>& ops) {
  double worst = 0;
  for (const auto& op : ops) worst = std::max(worst, op.added);
  return worst;
}

}  // namespace

TEST_CASE(
    "precision steps: a planted bfloat16 rounding in one block is the worst op, and "
    "without it every op adds float32 rounding only",
    "[precision]") {
  const std::string dir = test::temp_dir("precision_planted");
  const std::string clean = train_and_read_report(probed_config(dir + "/clean"));
  const auto clean_ops = reported_ops(clean);
  REQUIRE(clean_ops.size() > 20);
  CHECK(max_added(clean_ops) < 1e-6);
  CHECK(clean.find("\"reexecution_bitwise\": true") != std::string::npos);

  const std::string planted =
      train_and_read_report(probed_config(dir + "/planted"), test::bfloat16_rounding(2, 0));
  const auto worst = reported_ops(planted, true);
  REQUIRE(worst.size() == 1);
  CHECK(worst[0].block == 0);
  CHECK(worst[0].name == "titan::test_bfloat16_rounding");
  CHECK(worst[0].added > 1e-3);  // bfloat16's rounding: 2^-9 relative at most per element
  CHECK(worst[0].added < 8e-3);
  // The ops after it (block 1's) inherit its error but add float32 rounding only.
  for (const auto& op : reported_ops(planted)) {
    if (op.name == "titan::test_bfloat16_rounding") continue;
    INFO("layers." << op.block << " #" << op.index << " " << op.name);
    CHECK(op.added < 1e-6);
  }
}

TEST_CASE(
    "precision steps: with bf16 autocast the matmuls add bf16 rounding and the float32 "
    "ops float32 rounding",
    "[precision]") {
  const std::string dir = test::temp_dir("precision_bf16");
  const std::string json = train_and_read_report(probed_config(dir, MixedPrecision::kBfloat16));
  CHECK(json.find("\"dtype\": \"bfloat16\"") != std::string::npos);
  int matmuls = 0, norms = 0;
  for (const auto& op : reported_ops(json)) {
    INFO("layers." << op.block << " #" << op.index << " " << op.name << " " << op.dtype);
    if (op.name == "aten::matmul" || op.name == "aten::linear") {
      ++matmuls;
      CHECK(op.dtype == "bf16");
      CHECK(op.added > 1e-3);
      CHECK(op.added < 1e-2);
    } else if (op.name == "titan::rms_norm") {
      ++norms;
      CHECK(op.dtype == "f32");
      CHECK(op.added < 1e-6);
    }
  }
  CHECK(matmuls == 2 * 7);  // wq, wk, wv, wo, w1, w3, w2 in each of 2 blocks
  CHECK(norms == 2 * 2);
  // bf16 moves the loss well past float32's rounding.
  CHECK(json_field(json, "loss", "rel_error") > 1e-6);
}

TEST_CASE(
    "precision steps: the fused kernels add errors within 2x of their float64 figures on "
    "random inputs",
    "[precision]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("SKIPPED: this CPU has no AVX2+FMA");
  const std::string dir = test::temp_dir("precision_fused");
  Config config = probed_config(dir);
  config.model.flavor = "debugmodel";
  config.training.seq_len = 128;
  const auto ops = reported_ops(train_and_read_report(config));
  // The unit tests' measurement (test_model.cpp: the fused kernel against float64 on float32
  // inputs), as the report's max relative error, on inputs of the debug model's shapes.
  torch::manual_seed(7);
  auto figure = [](const at::Tensor& fused, const at::Tensor& reference) {
    return (fused.to(at::kDouble) - reference).abs().max().item<double>() /
           reference.abs().max().item<double>();
  };
  at::NoGradGuard no_grad;
  auto x = at::randn({2, 128, 256}), w = 1 + 0.1 * at::randn({256});
  const double rms_figure =
      figure(fused_rms_norm(x, w, 1e-5), rms_norm(x.to(at::kDouble), w.to(at::kDouble), 1e-5));
  auto a = at::randn({2, 128, 768}), b = at::randn({2, 128, 768});
  const double swiglu_figure =
      figure(fused_swiglu(a, b), at::silu(a.to(at::kDouble)) * b.to(at::kDouble));
  auto q = at::randn({2, 16, 128, 16}), k = at::randn({2, 16, 128, 16}),
       v = at::randn({2, 16, 128, 16});
  const double attention_figure =
      figure(fused_causal_attention(q, k, v),
             causal_attention(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble)));
  for (const auto& [name, unit] :
       std::vector<std::pair<std::string, double>>{{"titan::rms_norm", rms_figure},
                                                   {"titan::swiglu", swiglu_figure},
                                                   {"titan::causal_attention", attention_figure}}) {
    std::vector<double> added;
    for (const auto& op : ops)
      if (op.name == name) added.push_back(op.added);
    REQUIRE(!added.empty());
    std::sort(added.begin(), added.end());
    const double median = added[added.size() / 2];
    INFO(name << ": median added error in the report " << median << ", unit figure " << unit);
    CHECK(median <= 2 * unit);
    CHECK(median >= unit / 2);
  }
}

TEST_CASE(
    "precision steps: fingerprint.log is byte-identical with and without them, with "
    "activation checkpointing and micro-batches",
    "[precision]") {
  const std::string dir = test::temp_dir("precision_identity");
  const std::string common =
      "--training.seq_len 32 --training.global_batch_size 4 --activation_checkpoint.mode full "
      "--activation_checkpoint.determinism_check bitwise --debug.numerics_trace ops";
  auto plain = test::run_titan(test::tiny_run(dir + "/plain", 3, common));
  REQUIRE(plain.exit_code == 0);
  auto probed =
      test::run_titan(test::tiny_run(dir + "/probed", 3, common + " --debug.precision_steps 1,3"));
  INFO(probed.output);
  REQUIRE(probed.exit_code == 0);
  CHECK(test::read_text(dir + "/plain/fingerprint.log") ==
        test::read_text(dir + "/probed/fingerprint.log"));
  CHECK(test::read_text(dir + "/plain/numerics.log") ==
        test::read_text(dir + "/probed/numerics.log"));
  for (const char* step : {"step1", "step3"}) {
    const std::string json = test::read_text(dir + "/probed/precision/" + step + ".json");
    for (const char* key : {"\"step\"", "\"dtype\"", "\"reference\": \"float64\"", "\"loss\"",
                            "\"grad_norm\"", "\"ops\"", "\"gradients\"", "\"worst_op\"",
                            "\"reexecution_bitwise\": true", "\"micro_batch\": 1"}) {
      INFO(step << " " << key);
      CHECK(json.find(key) != std::string::npos);
    }
    CHECK(std::filesystem::exists(dir + "/probed/precision/" + step + ".txt"));
  }
  CHECK(probed.output.find("the ten ops adding the most error") != std::string::npos);
  CHECK(probed.output.find("[titan] precision steps: ") != std::string::npos);
}

TEST_CASE(
    "precision steps run under debug.batch_invariant: one sequence per forward, the re-execution "
    "bitwise the run's step, and fingerprint.log unchanged",
    "[precision][batch_invariant]") {
  const std::string dir = test::temp_dir("precision_invariant");
  const std::string common =
      "--training.seq_len 32 --training.local_batch_size 2 --training.global_batch_size 4 "
      "--debug.batch_invariant true";
  auto plain = test::run_titan(test::tiny_run(dir + "/plain", 3, common));
  REQUIRE(plain.exit_code == 0);
  auto probed =
      test::run_titan(test::tiny_run(dir + "/probed", 3, common + " --debug.precision_steps 2"));
  INFO(probed.output);
  REQUIRE(probed.exit_code == 0);
  CHECK(test::read_text(dir + "/plain/fingerprint.log") ==
        test::read_text(dir + "/probed/fingerprint.log"));
  const std::string json = test::read_text(dir + "/probed/precision/step2.json");
  CHECK(json.find("\"reexecution_bitwise\": true") != std::string::npos);
  // Four sequences, each a forward of its own: "micro-batches" 0 to 3 in the report.
  CHECK(json.find("\"micro_batch\": 3") != std::string::npos);
  CHECK(json.find("\"micro_batch\": 4") == std::string::npos);
  const auto ops = reported_ops(json);
  REQUIRE(ops.size() > 20);
  CHECK(max_added(ops) < 1e-6);
}

TEST_CASE("precision steps: grad_norm_accumulate float64 reports and clips with the exact norm",
          "[precision]") {
  const std::string dir = test::temp_dir("precision_grad_norm");
  Config config = probed_config(dir + "/f32");
  config.model.flavor = "debugmodel";
  config.training.seq_len = 32;
  const std::string f32 = train_and_read_report(config);
  config.job.dump_folder = dir + "/f64";
  config.debug.grad_norm_accumulate = GradNormAccumulate::kFloat64;
  const std::string f64 = train_and_read_report(config);
  auto sum_error = [](const std::string& json) {
    const double run = json_field(json, "grad_norm", "run");
    const double exact = json_field(json, "grad_norm", "run_gradients_exact");
    return std::abs(run - exact) / exact;
  };
  INFO("float32 sum off by " << sum_error(f32) << ", float64 by " << sum_error(f64));
  CHECK(sum_error(f32) > 1e-6);  // output.weight's 524,288 squares summed in float32
  CHECK(sum_error(f64) < 1e-12);
  CHECK(f32.find("\"accumulate\": \"float32\"") != std::string::npos);
  CHECK(f64.find("\"accumulate\": \"float64\"") != std::string::npos);
  // The report names the gradient whose float32 sum loses the most.
  CHECK(test::read_text(dir + "/f32/precision/step2.txt").find("of it from output.weight") !=
        std::string::npos);
}

TEST_CASE("precision steps: bad values are exit 2 naming the key", "[precision]") {
  const std::string dir = test::temp_dir("precision_refusals");
  struct Case {
    std::string flags, env, key;
  };
  const int port = test::free_port();
  const std::string two_ranks = fmt::format(
      "WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={}",
      port);
  for (const auto& c : std::vector<Case>{
           {"--debug.precision_steps 0", "", "debug.precision_steps"},
           {"--debug.precision_steps 1,x", "", "debug.precision_steps"},
           {"--debug.precision_reference float16", "", "debug.precision_reference"},
           {"--debug.precision_steps 1 --debug.precision_reference float32", "",
            "debug.precision_reference"},
           {"--debug.grad_norm_accumulate float16", "", "debug.grad_norm_accumulate"},
           {"--training.mixed_precision_param float16", "", "training.mixed_precision_param"},
           {"--debug.precision_steps 1", two_ranks, "debug.precision_steps"}}) {
    auto r = test::run_titan_env(c.env, test::tiny_run(dir, 2, c.flags));
    INFO(c.flags << " " << c.env << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c.key) != std::string::npos);
  }
  CHECK(!std::filesystem::exists(dir + "/fingerprint.log"));
  // A planted link where the reports go is refused before any output is written.
  const std::string linked = test::temp_dir("precision_link");
  std::filesystem::create_directories(linked + "/run");
  std::filesystem::create_directory_symlink(linked, linked + "/run/precision");
  auto r = test::run_titan(test::tiny_run(linked + "/run", 2, "--debug.precision_steps 1"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("precision: is a symbolic link") != std::string::npos);
  CHECK(!std::filesystem::exists(linked + "/run/fingerprint.log"));
}

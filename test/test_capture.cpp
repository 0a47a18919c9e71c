// Step capture and replay (debug.capture_steps, titan-train replay): the same build replays its
// own capture bit for bit, a planted fault is named as the first op to part with the replay side
// judged far from float64, two kernel sets are told apart and judged, and damaged or foreign
// captures are refused before anything runs.
#include <fmt/format.h>
#include <torch/version.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "catch_torch.h"
#include "fault_injection.h"
#include "instruments/step_capture.h"
#include "test_util.h"
#include "train/replay.h"
#include "train/trainer.h"
#include "util/cpu_features.h"

using namespace titan;

namespace {

namespace fs = std::filesystem;

Config capture_config(const std::string& dir, AcMode ac = AcMode::kNone, int64_t micro = 1) {
  Config c;
  c.job.dump_folder = dir;
  c.model.flavor = "tiny";
  c.training.local_batch_size = 2;
  c.training.global_batch_size = 2 * micro;
  c.training.seq_len = 32;
  c.training.steps = 3;
  c.training.device = DeviceChoice::kCpu;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = ac;
  c.debug.seed = 5;
  c.debug.capture_steps = {2};
  return c;
}

// Trains `config` in process; `hook` plants an op in the capture's executions.
std::string capture_step(const Config& config, std::shared_ptr<BlockOutputHook> hook = nullptr) {
  auto run = test::start_run(config);
  REQUIRE(run->run->instrument<StepCapture>() != nullptr);
  if (hook) run->run->instrument<StepCapture>()->set_block_output_hook(hook);
  run->run->train();
  INFO(run->log.str());
  const std::string folder = config.job.dump_folder + "/capture/step2";
  REQUIRE(fs::is_regular_file(folder + "/manifest.txt"));
  return folder;
}

ReplayReport replay(const std::string& folder, std::shared_ptr<BlockOutputHook> hook = nullptr,
                    std::vector<std::pair<std::string, std::string>> overrides = {}) {
  ReplayRequest request;
  request.capture = folder;
  request.overrides = std::move(overrides);
  std::ostringstream log;
  return replay_capture(request, log, std::move(hook));
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 1));
}

}  // namespace

TEST_CASE(
    "capture: the same build replays its capture bitwise identical, in each AC mode and "
    "with micro-batches",
    "[capture]") {
  const std::string dir = test::temp_dir("capture_same");
  struct Case {
    AcMode ac;
    int64_t micro;
  };
  for (const Case c : {Case{AcMode::kNone, 1}, Case{AcMode::kFull, 1}, Case{AcMode::kSelective, 1},
                       Case{AcMode::kNone, 2}}) {
    const std::string name = fmt::format("ac{}_mb{}", static_cast<int>(c.ac), c.micro);
    INFO(name);
    const std::string folder = capture_step(capture_config(dir + "/" + name, c.ac, c.micro));
    const ReplayReport r = replay(folder);
    INFO(format_replay_text(r));
    CHECK(r.identical);
    CHECK(r.capture_reexecution_bitwise);
    CHECK(r.machine_differences.empty());
    CHECK(r.ops_compared > 30 * c.micro);
    CHECK(r.gradients_compared == 21);
    CHECK(r.ops_differing == 0);
    // Each micro-batch's ops are captured: the last op line is the last micro-batch's.
    const std::string trace = test::read_text(folder + "/trace.txt");
    std::smatch m;
    REQUIRE(std::regex_search(trace, m, std::regex("\nop (\\d+) [^\n]*\ngrad")));
    CHECK(std::stoll(m[1]) == c.micro - 1);
  }
}

TEST_CASE("capture: the run's fingerprint.log is the same with and without a capture",
          "[capture]") {
  const std::string dir = test::temp_dir("capture_bits");
  Config with = capture_config(dir + "/with");
  Config without = capture_config(dir + "/without");
  without.debug.capture_steps.clear();
  capture_step(with);
  test::start_run(without)->run->train();
  CHECK(test::read_text(dir + "/with/fingerprint.log") ==
        test::read_text(dir + "/without/fingerprint.log"));
  // A capture is never overwritten: the same run again is refused before it trains.
  const auto again = test::run_titan(
      test::tiny_run(dir + "/with", 3, "--training.seq_len 32 --debug.capture_steps 2"));
  CHECK(again.exit_code == 2);
  CHECK(again.output.find("exists: a capture is never overwritten") != std::string::npos);
}

TEST_CASE(
    "capture: a planted fault is the first op to part, the replay side far from float64, "
    "and the ops after it inherit",
    "[capture]") {
  const std::string dir = test::temp_dir("capture_fault");
  const std::string folder =
      capture_step(capture_config(dir), test::scaled_output(2, 0, 1.0));  // the same op, x1
  const double perturbation = 1e-3;
  const ReplayReport r = replay(folder, test::scaled_output(2, 0, 1.0 + perturbation));
  INFO(format_replay_text(r));
  CHECK_FALSE(r.identical);
  REQUIRE(r.first.has_value());
  CHECK(r.first->capture.name == "titan::test_scaling");
  CHECK(r.first->capture.block == 0);
  CHECK(r.first->closer == Closer::kCapture);
  CHECK(std::abs(r.first->replay.added.max_rel - perturbation) < 0.01 * perturbation);
  CHECK(r.first->capture.added.max_rel < 1e-6);
  CHECK(r.first->factor > 1000);
  // Block 1's ops differ because their inputs did: both sides add float32 rounding only.
  REQUIRE_FALSE(r.worst.empty());
  for (const auto& op : r.worst) {
    INFO(op.capture.name << " layers." << op.capture.block << " #" << op.capture.index);
    CHECK(op.capture.block == 1);
    CHECK_FALSE(op.adds);
    CHECK(op.closer == Closer::kBothWithinBound);
  }
  CHECK(format_replay_text(r).find("the capture is closer to float64") != std::string::npos);
}

TEST_CASE("capture: replay judges the side whose op adds more error, whichever side it is",
          "[capture]") {
  OpComparison op;
  op.capture.dtype = op.replay.dtype = "f32";
  op.capture.added.max_rel = 1e-7;
  op.replay.added.max_rel = 1e-3;
  judge_op(op);
  CHECK(op.closer == Closer::kCapture);
  CHECK(std::abs(op.factor - 1e4) < 1);
  CHECK(op.adds);
  std::swap(op.capture.added, op.replay.added);
  judge_op(op);
  CHECK(op.closer == Closer::kReplay);
  op.capture.added.max_rel = 1e-7;
  op.replay.added.max_rel = 2e-7;
  judge_op(op);
  CHECK(op.closer == Closer::kBothWithinBound);  // 16 x 2^-24 = 9.5e-7
  CHECK_FALSE(op.adds);
  op.capture.dtype = "bf16";  // bfloat16's bound: 16 x 2^-8
  op.capture.added.max_rel = 0.05;
  op.replay.added.max_rel = 0.001;
  judge_op(op);
  CHECK(op.closer == Closer::kBothWithinBound);
}

TEST_CASE(
    "capture: titan's fused kernels against ATen's: the first op that differs is named and "
    "both sides are judged",
    "[capture]") {
  if (!cpu_has_avx2_fma()) TITAN_SKIP("no AVX2 and FMA: the fused kernels never run here");
  const std::string dir = test::temp_dir("capture_kernels");
  const std::string folder = capture_step(capture_config(dir));
  const ReplayReport r = replay(folder, nullptr, {{"debug.cpu_kernels", "aten"}});
  INFO(format_replay_text(r));
  CHECK_FALSE(r.identical);
  bool attention_listed = false;
  for (const auto& d : r.machine_differences)
    attention_listed |= d.key == "attention_kernel" && d.capture.rfind("fused_", 0) == 0;
  CHECK(attention_listed);
  REQUIRE(r.first.has_value());
  CHECK(r.first->capture.block == 0);
  CHECK(r.first->capture.name.rfind("titan::", 0) == 0);  // a fused kernel's op
  CHECK(r.first->capture.added.max_rel > 0);
  CHECK(r.first->replay.added.max_rel > 0);
  CHECK(r.first->capture.added.max_rel < r.first->bound);  // both round as float32 does
  CHECK(r.first->replay.added.max_rel < r.first->bound);
  // Every gradient differs; the backward computes the output projection's first.
  CHECK(r.gradients_differing == r.gradients_compared);
  CHECK(r.first_gradient_differing == "output.weight");
  fs::remove_all(dir);
}

TEST_CASE(
    "capture: replay through the binary: exit 0 identical with text and JSON, exit 2 for a "
    "damaged, altered or foreign capture, naming the file",
    "[capture]") {
  const std::string dir = test::temp_dir("capture_binary");
  const auto made = test::run_titan(
      test::tiny_run(dir + "/run", 2, "--training.seq_len 32 --debug.capture_steps 2"));
  REQUIRE(made.exit_code == 0);
  const std::string folder = dir + "/run/capture/step2";
  const auto same = test::run_titan("replay " + folder);
  INFO(same.output);
  CHECK(same.exit_code == 0);
  CHECK(same.output.find("bitwise identical") != std::string::npos);
  const auto json = test::run_titan("replay " + folder + " --json");
  CHECK(json.exit_code == 0);
  CHECK(json.output.find("\"identical\": true") != std::string::npos);
  CHECK(json.output.find("\"first_op\": null") != std::string::npos);

  auto copy = [&](const std::string& name) {
    const std::string to = dir + "/" + name;
    fs::copy(folder, to, fs::copy_options::recursive);
    return to;
  };
  {  // a byte of the batch altered
    const std::string c = copy("altered");
    flip_byte(c + "/batch.safetensors", 100);
    const auto r = test::run_titan("replay " + c);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c + "/batch.safetensors: its checksum differs") != std::string::npos);
  }
  {  // the trace truncated
    const std::string c = copy("truncated");
    fs::resize_file(c + "/trace.txt", fs::file_size(c + "/trace.txt") / 2);
    const auto r = test::run_titan("replay " + c);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c + "/trace.txt: holds") != std::string::npos);
    CHECK(r.output.find("truncated or altered") != std::string::npos);
  }
  {  // the state's model file damaged: named by the checkpoint's own manifest
    const std::string c = copy("state");
    flip_byte(c + "/state/step-1/model.safetensors", 4000);
    const auto r = test::run_titan("replay " + c);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("model.safetensors") != std::string::npos);
  }
  {  // another run's state at the same step, and the state moved to another step: the
     // capture's manifest covers the state's own
    const auto other = test::run_titan(test::tiny_run(
        dir + "/other", 2, "--training.seq_len 32 --debug.capture_steps 2 --debug.seed 9"));
    REQUIRE(other.exit_code == 0);
    const std::string c = copy("foreign_state");
    fs::remove_all(c + "/state/step-1");
    fs::copy(dir + "/other/capture/step2/state/step-1", c + "/state/step-1",
             fs::copy_options::recursive);
    const auto r = test::run_titan("replay " + c);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c + "/state/step-1/manifest.txt: its checksum differs from the "
                            "manifest's (altered, or another run's)") != std::string::npos);
    const std::string moved = copy("moved_state");
    fs::rename(moved + "/state/step-1", moved + "/state/step-7");
    const auto m = test::run_titan("replay " + moved);
    CHECK(m.exit_code == 2);
    CHECK(m.output.find(moved + "/state/step-1/manifest.txt: cannot be read") != std::string::npos);
  }
  {  // another major version
    const std::string c = copy("foreign");
    std::string manifest = test::read_text(c + "/manifest.txt");
    manifest = std::regex_replace(manifest, std::regex("titan_train_version \\S+"),
                                  "titan_train_version 7.0.0");
    test::write_text(c + "/manifest.txt", manifest);
    const auto r = test::run_titan("replay " + c);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("captured by titan-train 7.0.0, major version 7") != std::string::npos);
  }
  {  // not a capture, another model, a bad flag
    CHECK(test::run_titan("replay " + dir).exit_code == 2);
    const auto flavor = test::run_titan("replay " + folder + " --model.flavor debugmodel");
    CHECK(flavor.exit_code == 2);
    CHECK(flavor.output.find("model.flavor") != std::string::npos);
    CHECK(test::run_titan("replay " + folder + " --device tpu").exit_code == 2);
    // what the capture fixes: the batch's shape, the data, the optimizer's step
    for (const char* fixed :
         {"--training.seq_len 64", "--training.local_batch_size=4", "--optimizer.lr 1"}) {
      const auto r = test::run_titan("replay " + folder + " " + fixed);
      INFO(r.output);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.output, Catch::Contains("is fixed by the capture"));
    }
    const auto threads = test::run_titan("replay " + folder + " --training.cpu_threads 1");
    INFO(threads.output);
    CHECK((threads.exit_code == 0 || threads.exit_code == 1));  // identical or parted: replayed
  }
}

TEST_CASE("capture: two OpenBLAS kernel sets are listed as a machine difference and judged",
          "[capture]") {
  if (!__builtin_cpu_supports("avx512f"))
    TITAN_SKIP("this CPU runs no AVX-512 OpenBLAS kernels beside Haswell's");
  const std::string dir = test::temp_dir("capture_blas");
  const auto made = test::run_titan_env(
      "OPENBLAS_CORETYPE=Haswell",
      test::tiny_run(dir + "/run", 2,
                     "--training.seq_len 64 --model.flavor debugmodel --debug.capture_steps 2"));
  REQUIRE(made.exit_code == 0);
  const std::string folder = dir + "/run/capture/step2";
  const auto r = test::run_titan_env("OPENBLAS_CORETYPE=SkylakeX", "replay " + folder);
  INFO(r.output);
  CHECK(r.output.find("OPENBLAS_CORETYPE: Haswell -> SkylakeX") != std::string::npos);
  CHECK(r.output.find("blas_kernels: OpenBLAS Haswell -> OpenBLAS SkylakeX") != std::string::npos);
  // Whether these shapes' matmuls round differently is the kernels' business; the report must
  // say which, and judge the first differing op when they do.
  if (r.exit_code == 0) {
    CHECK(r.output.find("bitwise identical") != std::string::npos);
  } else {
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("first op that differs:") != std::string::npos);
    CHECK(r.output.find("verdict: ") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "capture: the committed capture of the libtorch 1.13 build replays here, identical or "
    "with the first differing op judged",
    "[capture]") {
  // test/data/capture_tiny_step1 (scripts/make_capture_testdata.sh). On the libtorch 2.6 leg
  // this is the replay of another build.
  const std::string folder = test::source_dir() + "/test/data/capture_tiny_step1";
  const auto r = test::run_titan("replay " + folder);
  INFO(r.output);
  const bool other_libtorch = std::string(TORCH_VERSION) != "1.13.0";
  CHECK((r.output.find("libtorch_version: 1.13.0 -> ") != std::string::npos) == other_libtorch);
  CHECK(r.output.find("loss: capture 6.6357131 (float64 6.63571237") != std::string::npos);
  if (r.output.find("machine and build differences (capture -> replay): none") !=
      std::string::npos) {
    CHECK(r.exit_code == 0);  // the same build on the same kind of machine
  }
  if (r.exit_code == 0) {
    CHECK(r.output.find("bitwise identical: 36 op outputs, 21 gradients") != std::string::npos);
  } else {
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("first op that differs:") != std::string::npos);
    CHECK(r.output.find("added error against float64 (max rel): capture ") != std::string::npos);
    CHECK(r.output.find("verdict: ") != std::string::npos);
  }
}

TEST_CASE(
    "capture: ops recorded on one side only are named, and the ops around them are still "
    "matched and compared",
    "[capture]") {
  // Another libtorch records other ops: here the capture has a reshape the replay does not.
  auto op = [](int64_t index, const std::string& name, uint64_t checksum) {
    CapturedOp o;
    o.block = 0;
    o.index = index;
    o.name = name;
    o.dtype = "f32";
    o.shape = "[2,16,64]";
    o.checksum = checksum;
    o.norm = 1;
    return o;
  };
  CaptureRecord capture, replay;
  capture.ops = {op(0, "titan::rms_norm", 1), op(2, "aten::matmul", 2), op(39, "aten::reshape", 3),
                 op(41, "aten::matmul", 4), op(43, "aten::add", 5)};
  replay.ops = {op(0, "titan::rms_norm", 1), op(2, "aten::matmul", 2), op(43, "aten::matmul", 4),
                op(45, "aten::add", 6)};
  const ReplayReport r = compare_replay(capture, replay, {}, {});
  INFO(format_replay_text(r));
  CHECK_FALSE(r.identical);
  CHECK(r.ops_compared == 4);
  CHECK(r.ops_differing == 1);
  REQUIRE(r.first.has_value());
  CHECK(r.first->capture.name == "aten::add");
  CHECK(r.structure_difference.find("1 ops only in the capture (first: micro-batch 0 layers.0 "
                                    "op #39 aten::reshape") == 0);
  CHECK(r.structure_difference.find("0 only here") != std::string::npos);
  // The same ops on both sides and the same bits: identical, the op indices notwithstanding.
  replay.ops = capture.ops;
  replay.ops[3].index = 40;
  CHECK(compare_replay(capture, replay, {}, {}).identical);
}

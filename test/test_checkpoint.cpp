// Checkpoints through the binary: bit-exact resume, SIGTERM and kill -9 at any moment, damage
// named through the manifest, config changes refused or warned about, keep_latest_k, export.
#include <filesystem>
#include <random>
#include <regex>
#include <string>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/safetensors.h"
#include "test_util.h"
#include "util/files.h"
#include "util/strings.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

const char* kSaving =
    "--checkpoint.enable --checkpoint.last_save_model_only false --checkpoint.keep_latest_k 0 ";

// metrics.jsonl without its timing fields (tps, memory, ...): step, loss, grad_norm, lr, tokens.
std::string metrics_numerics(const std::string& path) {
  std::string out;
  std::regex fields(
      R"(\{"step": \d+, "loss": [^,]+, "grad_norm": [^,]+, "lr": [^,]+, "tokens_seen": \d+)");
  const std::string text = test::read_text(path);
  for (std::sregex_iterator it(text.begin(), text.end(), fields), end; it != end; ++it) {
    out += it->str() + "\n";
  }
  return out;
}

std::string straight_run(const std::string& tag, int steps, const std::string& extra) {
  auto dir = test::temp_dir(tag);
  auto r = test::run_titan(test::tiny_run(dir, steps, extra));
  REQUIRE(r.exit_code == 0);
  return dir;
}

// Shell: start the run in the background, wait until fingerprint.log has step `step`, send
// `signals` (e.g. "-TERM"), then wait and print the exit code on the last line.
std::string signal_at_step(const std::string& flags, const std::string& dir, int step,
                           const std::string& signals) {
  return test::binary() + " " + flags + " > " + dir + ".log 2>&1 & p=$!; " +
         "for i in $(seq 600); do grep -q '^step " + std::to_string(step) + " ' " + dir +
         "/fingerprint.log 2>/dev/null && break; sleep 0.05; done; " + signals +
         "; wait $p; echo \"exit $?\"";
}

std::string damage_folder(const std::string& source) {
  auto copy = source + "_copy";
  fs::remove_all(copy);
  fs::copy(source, copy, fs::copy_options::recursive);
  return copy;
}

}  // namespace

TEST_CASE(
    "checkpoint: 10 steps and a resume give the files of 20 straight, AC and dropout on or off",
    "[checkpoint]") {
  for (const std::string mode : {"--activation_checkpoint.mode none --model.dropout 0",
                                 "--activation_checkpoint.mode full --model.dropout 0.1"}) {
    INFO(mode);
    auto straight = straight_run("ckpt_straight", 20, mode);
    auto dir = test::temp_dir("ckpt_resumed");
    const std::string flags =
        test::tiny_run(dir, 20, mode + " " + kSaving + "--checkpoint.interval 10");
    REQUIRE(test::run_titan(flags).exit_code == 0);
    fs::remove_all(dir + "/checkpoint/step-20");  // as if killed after step 10's save
    auto r = test::run_titan(flags);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("resumed from " + dir + "/checkpoint/step-10 (step 10)"));
    CHECK_THAT(r.output, Catch::Contains("done: 10 steps"));
    CHECK(test::read_text(dir + "/fingerprint.log") ==
          test::read_text(straight + "/fingerprint.log"));
    CHECK(metrics_numerics(dir + "/metrics.jsonl") ==
          metrics_numerics(straight + "/metrics.jsonl"));
    CHECK(metrics_numerics(dir + "/metrics.jsonl").find("\"step\": 20") != std::string::npos);
  }
}

TEST_CASE("checkpoint: SIGTERM ends the step, saves, exits 0, and the resumed run is bit-exact",
          "[checkpoint]") {
  auto straight = straight_run("ckpt_term_straight", 400, "");
  auto dir = test::temp_dir("ckpt_term");
  const std::string flags =
      test::tiny_run(dir, 400, std::string(kSaving) + "--checkpoint.interval 1000");
  auto r = test::run_shell(signal_at_step(flags, dir, 20, "kill -TERM $p"));
  CHECK_THAT(r.output, Catch::EndsWith("exit 0\n"));
  auto log = test::read_text(dir + ".log");
  CHECK_THAT(log, Catch::Contains("stopped by SIGTERM after step"));
  CHECK_THAT(log, Catch::Contains("run the same command to resume"));
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex(R"(saved (\S+/step-(\d+)) \(full)")));
  const int saved = std::stoi(m[2]);
  CHECK(saved >= 20);
  CHECK(saved < 400);
  auto resumed = test::run_titan(flags);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from " + m[1].str()));
  CHECK(test::read_text(dir + "/fingerprint.log") ==
        test::read_text(straight + "/fingerprint.log"));
}

TEST_CASE("checkpoint: a second SIGTERM aborts the save, keeps the previous checkpoint, exits 143",
          "[checkpoint]") {
  // debugmodel: a save of ~75 MB, long enough to land the second signal inside it. Signals sent
  // back to back would merge into one (the kernel does not queue them).
  std::string dir;
  test::RunResult r;
  // A save that ends before the polling shell sees its folder misses the moment (the run then
  // exits 0 with its checkpoint): that is a missed moment, not a failure, so up to 3 tries.
  for (int attempt = 0; attempt < 3; ++attempt) {
    dir = test::temp_dir("ckpt_twice");
    const std::string flags = test::tiny_run(
        dir, 400, std::string(kSaving) + "--model.flavor debugmodel --checkpoint.interval 2");
    const std::string during_save =
        "while kill -0 $p 2>/dev/null; do set -- " + dir +
        "/checkpoint/.step-*.tmp; [ -e \"$1\" ] && break; done; kill -TERM $p";
    // With the malloc tuning the save is fast enough (on libtorch 2.6) to end before the polling
    // shell sees its folder (2 of 5 runs); glibc's defaults keep the window open. The abort does
    // not depend on the allocator.
    r = test::run_shell("TITAN_MALLOC_TUNING=0 " +
                        signal_at_step(flags, dir, 3, "kill -TERM $p; " + during_save));
    if (r.output != "exit 0\n") break;
  }
  CHECK_THAT(r.output, Catch::EndsWith("exit 143\n"));
  auto log = test::read_text(dir + ".log");
  std::smatch m;
  REQUIRE(std::regex_search(
      log, m,
      std::regex(R"(a second SIGTERM aborted the save of step-(\d+); .* \(latest: step-(\d+)\))")));
  for (const auto& entry : fs::directory_iterator(dir + "/checkpoint")) {
    CHECK_FALSE(ends_with(entry.path().string(), ".tmp"));
  }
  const auto steps = list_checkpoints(dir + "/checkpoint").steps;
  REQUIRE_FALSE(steps.empty());
  CHECK(steps.back() == std::stoll(m[2]));
  CHECK(std::stoll(m[1]) > steps.back());
  auto exported = test::run_titan("export " + dir + "/checkpoint -o " + dir + "/w.safetensors");
  CHECK(exported.exit_code == 0);  // the latest complete checkpoint still loads
}

TEST_CASE("checkpoint: kill -9 at 12 moments never breaks the latest checkpoint or the files",
          "[checkpoint]") {
  // 1000 steps: the 12 tries train at most 12 x 450 ms of them (about 7 ms a step with a save
  // every 3), so the run cannot finish before its last kill.
  auto straight = straight_run("ckpt_kill_straight", 1000, "");
  auto dir = test::temp_dir("ckpt_kill");
  const std::string flags =
      test::tiny_run(dir, 1000,
                     "--checkpoint.enable --checkpoint.last_save_model_only false "
                     "--checkpoint.interval 3 --checkpoint.keep_latest_k 2");
  std::mt19937 rng(2026);  // fixed delays: the same moments on the same machine
  std::uniform_int_distribution<int> delay_ms(0, 450);  // over some 20 save cycles
  // 12 kills of a run that has a checkpoint to lose: each waits until the folder holds a
  // checkpoint (at once after the first), then kills after a delay, so a slow start-up under
  // load cannot use up the tries.
  const std::string wait_for_checkpoint =
      "for i in $(seq 1200); do ls " + dir +
      "/checkpoint 2>/dev/null | grep -q '^step-' && break; kill -0 $p 2>/dev/null || break; "
      "sleep 0.05; done; ";
  int kills = 0;
  for (int i = 0; i < 24 && kills < 12; ++i) {
    const int ms = delay_ms(rng);
    auto r = test::run_shell(test::binary() + " " + flags + " > /dev/null 2>&1 & p=$!; " +
                             wait_for_checkpoint + "sleep " + std::to_string(ms / 1000.0) +
                             "; kill -9 $p 2>/dev/null; wait $p; echo $?");
    INFO("try " << i << ", killed after " << ms << " ms: exit " << r.output);
    if (r.output == "0\n") break;  // the run finished first
    REQUIRE(r.output == "137\n");
    if (list_checkpoints(dir + "/checkpoint").steps.empty()) continue;
    ++kills;
    // The latest complete checkpoint loads whole, every file checked against its manifest (what
    // export and a resume read first).
    std::vector<std::string> warnings;
    const std::string latest = resolve_step_folder(dir + "/checkpoint", warnings);
    REQUIRE_NOTHROW(load_checkpoint(latest));
  }
  CHECK(kills == 12);
  // The rest of the run saves twice, not every 3 steps: a save's fsyncs take most of a step's
  // time under load, and the interval changes no bit of the steps.
  auto last =
      test::run_titan(test::tiny_run(dir, 1000,
                                     "--checkpoint.enable --checkpoint.last_save_model_only "
                                     "false --checkpoint.interval 500"));
  REQUIRE(last.exit_code == 0);
  CHECK(test::read_text(dir + "/fingerprint.log") ==
        test::read_text(straight + "/fingerprint.log"));
  CHECK(metrics_numerics(dir + "/metrics.jsonl") == metrics_numerics(straight + "/metrics.jsonl"));
}

TEST_CASE("checkpoint: keep_latest_k deletes the oldest only once a newer save is complete",
          "[checkpoint]") {
  auto dir = test::temp_dir("ckpt_keep");
  auto r = test::run_titan(test::tiny_run(dir, 10,
                                          "--checkpoint.enable --checkpoint.interval 2 "
                                          "--checkpoint.keep_latest_k 3"));
  REQUIRE(r.exit_code == 0);
  CHECK(list_checkpoints(dir + "/checkpoint").steps == std::vector<int64_t>{6, 8, 10});
  CHECK_THAT(r.output, Catch::Contains("step-8 (full"));
  CHECK_THAT(r.output, Catch::Contains("step-10 (model only"));  // last_save_model_only
  CHECK_THAT(r.output, Catch::Contains("removed steps 2"));
  // A finished run's final, model-only save cannot continue training; the error says what can.
  auto more = test::run_titan(test::tiny_run(dir, 12, "--checkpoint.enable"));
  CHECK(more.exit_code == 2);
  CHECK_THAT(more.output, Catch::Contains("model-only checkpoint"));
  CHECK_THAT(more.output, Catch::Contains("checkpoint.load_step"));
  auto again =
      test::run_titan(test::tiny_run(dir, 12, "--checkpoint.enable --checkpoint.load_step 8"));
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("resumed from " + dir + "/checkpoint/step-8"));
}

TEST_CASE("checkpoint: a truncated, flipped or missing file is named, exit 1, nothing modified",
          "[checkpoint]") {
  auto dir = test::temp_dir("ckpt_damage");
  const std::string flags =
      test::tiny_run(dir, 4, std::string(kSaving) + "--checkpoint.interval 2");
  REQUIRE(test::run_titan(flags).exit_code == 0);
  const std::string step4 = dir + "/checkpoint/step-4";
  const auto pristine = damage_folder(step4);
  const std::string fingerprint = test::read_text(dir + "/fingerprint.log");
  struct Damage {
    const char* file;
    const char* how;
    const char* message;
  };
  for (const Damage d : {Damage{"model.safetensors", "truncate", "the manifest says"},
                         Damage{"optimizer.safetensors", "flip", "checksum"},
                         Damage{"train_state.bin", "delete", "No such file"}}) {
    INFO(d.file << " " << d.how);
    fs::remove_all(step4);
    fs::copy(pristine, step4, fs::copy_options::recursive);
    const std::string path = step4 + "/" + d.file;
    std::string bytes = test::read_text(path);
    if (std::string(d.how) == "truncate") bytes.resize(bytes.size() / 2);
    if (std::string(d.how) == "flip") bytes[bytes.size() - 3] ^= 0x10;
    if (std::string(d.how) == "delete") {
      fs::remove(path);
    } else {
      test::write_text(path, bytes);
    }
    const std::string damaged = std::string(d.how) == "delete" ? "" : test::read_text(path);
    auto r = test::run_titan(flags + " --training.steps 6");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.output, Catch::Contains(path));
    CHECK_THAT(r.output, Catch::Contains(d.message));
    CHECK_THAT(r.output, Catch::Contains("checkpoint.load_step"));
    CHECK(test::read_text(dir + "/fingerprint.log") == fingerprint);
    if (!damaged.empty()) CHECK(test::read_text(path) == damaged);
  }
  auto earlier = test::run_titan(flags + " --training.steps 6 --checkpoint.load_step 2");
  CHECK(earlier.exit_code == 0);  // the hint works
}

TEST_CASE("checkpoint: a shape change is refused naming the tensor, a new lr is a warning",
          "[checkpoint]") {
  auto dir = test::temp_dir("ckpt_config");
  const std::string flags =
      test::tiny_run(dir, 4, std::string(kSaving) + "--checkpoint.interval 2");
  REQUIRE(test::run_titan(flags).exit_code == 0);
  const std::string fingerprint = test::read_text(dir + "/fingerprint.log");
  auto shape = test::run_titan(flags + " --training.steps 6 --model.flavor debugmodel");
  CHECK(shape.exit_code == 2);
  CHECK_THAT(shape.output, Catch::Contains("tensor \"tok_embeddings.weight\" has shape [512, 64] "
                                           "there, [2048, 256] in this config's model"));
  CHECK(test::read_text(dir + "/fingerprint.log") == fingerprint);
  auto lr = test::run_titan(flags + " --training.steps 6 --optimizer.lr 0.001");
  CHECK(lr.exit_code == 0);
  CHECK_THAT(lr.output, Catch::Contains("was saved with another config; changed: "));
  CHECK_THAT(lr.output, Catch::Contains("optimizer.lr 0.0008 -> 0.001"));
  CHECK_THAT(lr.output, Catch::Contains("apply from step 5"));
}

TEST_CASE("checkpoint: initial_load_path refuses missing, extra and mis-shaped tensors (exit 2)",
          "[checkpoint]") {
  auto dir = test::temp_dir("ckpt_initial");
  REQUIRE(test::run_titan(test::tiny_run(dir + "/src", 2, "--checkpoint.enable")).exit_code == 0);
  const std::string exported = dir + "/w.safetensors";
  REQUIRE(test::run_titan("export " + dir + "/src/checkpoint -o " + exported).exit_code == 0);
  auto good =
      test::run_titan(test::tiny_run(dir + "/a", 1, "--checkpoint.initial_load_path " + exported));
  CHECK(good.exit_code == 0);
  CHECK_THAT(good.output, Catch::Contains("initial weights from " + exported + " (21 tensors)"));

  auto contents = parse_safetensors(test::read_text(exported), exported);
  auto write = [&](const std::vector<NamedTensor>& tensors, const std::string& name) {
    const std::string path = dir + "/" + name;
    HashedFileWriter out(path);
    write_safetensors(out, tensors, {});
    out.finish();
    return test::run_titan(test::tiny_run(dir + "/b", 1, "--checkpoint.initial_load_path " + path));
  };
  auto missing = contents.tensors;
  missing.erase(missing.begin() + 1);
  auto r = write(missing, "missing.safetensors");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("tensor \"layers.0.attention.wq.weight\" is missing"));
  auto extra = contents.tensors;
  extra.push_back({"layers.9.attention.wq.weight", extra[1].tensor});
  r = write(extra, "extra.safetensors");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("\"layers.9.attention.wq.weight\" is not a parameter"));
  auto shaped = contents.tensors;
  shaped[0].tensor = shaped[0].tensor.narrow(0, 0, 10);
  r = write(shaped, "shaped.safetensors");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("has shape [10, 64] there, [512, 64]"));
  r = test::run_titan(
      test::tiny_run(dir + "/b", 1, "--checkpoint.initial_load_path " + dir + "/none"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("checkpoint.initial_load_path"));
  CHECK_FALSE(fs::exists(dir + "/b/fingerprint.log"));
}

TEST_CASE("export: bitwise float32, exact bfloat16, never over an existing file unless --force",
          "[checkpoint]") {
  auto dir = test::temp_dir("export");
  REQUIRE(test::run_titan(test::tiny_run(dir, 2, kSaving)).exit_code == 0);
  const std::string step = dir + "/checkpoint/step-2";
  auto model = parse_safetensors(test::read_text(step + "/model.safetensors"), "model");
  auto r = test::run_titan("export " + step + " -o " + dir + "/f32.safetensors");
  REQUIRE(r.exit_code == 0);
  auto f32 = parse_safetensors(test::read_text(dir + "/f32.safetensors"), "f32");
  r = test::run_titan("export " + step + " -o " + dir + "/bf16.safetensors --dtype bfloat16");
  REQUIRE(r.exit_code == 0);
  auto bf16 = parse_safetensors(test::read_text(dir + "/bf16.safetensors"), "bf16");
  REQUIRE(f32.tensors.size() == model.tensors.size());
  REQUIRE(bf16.tensors.size() == model.tensors.size());
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    INFO(model.tensors[i].name);
    CHECK(f32.tensors[i].name == model.tensors[i].name);
    CHECK(at::equal(f32.tensors[i].tensor, model.tensors[i].tensor));
    CHECK(bf16.tensors[i].tensor.scalar_type() == at::kBFloat16);
    CHECK(at::equal(bf16.tensors[i].tensor, model.tensors[i].tensor.to(at::kBFloat16)));
  }
  const std::string before = test::read_text(dir + "/f32.safetensors");
  r = test::run_titan("export " + step + " -o " + dir + "/f32.safetensors --dtype bfloat16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("--force"));
  CHECK(test::read_text(dir + "/f32.safetensors") == before);
  r = test::run_titan("export " + step + " -o " + dir +
                      "/f32.safetensors --dtype bfloat16 --force");
  CHECK(r.exit_code == 0);
  r = test::run_titan("export " + dir + "/nothing -o " + dir + "/x.safetensors");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("no such checkpoint folder"));
  r = test::run_titan("export " + step + " -o " + dir + "/x.safetensors --dtype float64");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("use float32, bfloat16 or float16"));
  CHECK_FALSE(fs::exists(dir + "/x.safetensors"));
}

// TrainState and the in-memory snapshot: the encoding round-trips and refuses damage, and a
// snapshot restored after step k reproduces steps k+1..n bit for bit (fingerprint lines equal),
// with dropout and activation checkpointing on.
#include <sstream>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "checkpoint/train_state.h"
#include "test_util.h"
#include "util/error.h"

using namespace titan;

namespace {

Config snapshot_config(const std::string& tag, AcMode mode) {
  Config c;
  c.job.dump_folder = test::temp_dir(tag);
  c.model.flavor = "tiny";
  c.model.dropout = 0.1;  // consumes the CPU generator every step
  c.training.local_batch_size = 2;
  c.training.seq_len = 32;
  c.training.steps = 7;
  c.training.device = DeviceChoice::kCpu;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = mode;
  c.activation_checkpoint.determinism_check = RecomputeCheck::kBitwise;
  c.debug.seed = 77;
  return c;
}

}  // namespace

TEST_CASE("train_state: encoding round-trips and equality sees every field", "[train_state]") {
  auto run = test::start_run(snapshot_config("state_codec", AcMode::kNone));
  run->trainer->train_step();
  run->trainer->train_step();
  TrainState state = run->trainer->engine().state();
  CHECK(state.step == 2);
  CHECK(state.tokens_seen == 2 * 2 * 32);
  CHECK(state.loader.offset + state.loader.doc_cursor > 0);
  TrainState back = decode_train_state(encode_train_state(state), "mem");
  CHECK(back == state);

  TrainState other = state;
  other.loader.offset += 1;
  CHECK(other != state);
  other = state;
  other.rng.cpu = other.rng.cpu.clone();
  other.rng.cpu[100] = (other.rng.cpu[100].item<uint8_t>() + 1) % 256;
  CHECK(other != state);
}

TEST_CASE("train_state: an MoE model's expert biases round-trip as version 3, exactly",
          "[train_state][moe]") {
  Config c = snapshot_config("state_moe", AcMode::kNone);
  c.model.name = "qwen3";
  c.model.flavor = "tiny_moe";
  c.debug.qwen3_moe_load_balancing = true;
  auto run = test::start_run(c);
  run->trainer->train_step();
  TrainState state = run->trainer->engine().state();
  REQUIRE(state.model_buffers.size() == 2);
  const at::Tensor bias = state.model_buffers.at("layers.0.moe.expert_bias");
  CHECK(bias.abs().max().item<float>() > 0);  // one update of +-0.001, re-centred
  const std::string bytes = encode_train_state(state);
  CHECK(bytes[8] == 3);
  TrainState back = decode_train_state(bytes, "mem");
  CHECK(back == state);
  CHECK(at::equal(back.model_buffers.at("layers.0.moe.expert_bias"), bias));
  TrainState other = state;
  other.model_buffers["layers.0.moe.expert_bias"] = bias + 1e-9f;
  CHECK(other != state);
  // A state without them does not resume an MoE model.
  TrainState dense = state;
  dense.model_buffers.clear();
  CHECK(encode_train_state(dense)[8] == 1);
  CHECK_THROWS_WITH(
      run->trainer->engine().apply(dense),
      Catch::Contains("the train state has no layers.0.moe.expert_bias of 8 experts"));
}

TEST_CASE("train_state: a damaged encoding is refused naming the source", "[train_state]") {
  TrainState state;
  state.step = 5;
  state.rng = capture_rng_state();
  const std::string bytes = encode_train_state(state);
  CHECK_THROWS_WITH(decode_train_state(bytes.substr(0, bytes.size() - 1), "a/train_state.bin"),
                    Catch::Contains("a/train_state.bin") && Catch::Contains("ends early"));
  std::string wrong_magic = bytes;
  wrong_magic[0] = 'X';
  CHECK_THROWS_WITH(decode_train_state(wrong_magic, "f"), Catch::Contains("magic"));
  std::string wrong_version = bytes;
  wrong_version[8] = 9;
  CHECK_THROWS_WITH(decode_train_state(wrong_version, "f"), Catch::Contains("version 9"));
  CHECK_THROWS_WITH(decode_train_state(bytes + "x", "f"), Catch::Contains("unexpected bytes"));
}

TEST_CASE("train_state: restoring a snapshot after step k repeats steps k+1..n bit for bit",
          "[train_state]") {
  const AcMode mode = GENERATE(AcMode::kNone, AcMode::kFull);
  INFO("activation_checkpoint.mode = " << to_string(mode));
  Config c = snapshot_config("snapshot", mode);
  auto run = test::start_run(c);
  Trainer& trainer = *run->trainer;
  StepEngine& engine = trainer.engine();
  for (int i = 0; i < 3; ++i) trainer.train_step();
  const Snapshot snapshot = engine.snapshot();
  for (int i = 0; i < 4; ++i) trainer.train_step();  // steps 4..7
  const TrainState after_first = engine.state();
  engine.restore(snapshot);
  CHECK(engine.state() == snapshot.state);
  for (int i = 0; i < 4; ++i) trainer.train_step();  // steps 4..7 again
  CHECK(engine.state() == after_first);

  auto lines = test::fingerprint_step_list(c.job.dump_folder + "/fingerprint.log");
  REQUIRE(lines.size() == 11);  // 1..7, then 4..7 again
  for (int i = 0; i < 4; ++i) {
    CHECK(lines[7 + i] == lines[3 + i]);  // byte-identical, parameter checksum included
  }
  CHECK(lines[3] != lines[4]);  // the steps really differ from each other
}

// Qwen3-MoE through the binary: torchtitan's qwen3_moe_debug.toml, the start-up and per-step
// lines, the expert biases in checkpoints and fingerprints (a bit-exact resume), batch
// invariance over ranks with the experts sharded, and the AC checker on the routed blocks.
#include <filesystem>
#include <string>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/train_state.h"
#include "test_ranks.h"
#include "test_util.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// tiny_moe with load balancing on, so that the expert biases move.
const char* const kMoe =
    " --model.name qwen3 --model.flavor tiny_moe --debug.qwen3_moe_load_balancing ";
const char* const kSaving =
    " --checkpoint.enable --checkpoint.last_save_model_only false --checkpoint.keep_latest_k 0 ";

std::string data_file(const std::string& name) { return test::source_dir() + "/test/data/" + name; }

}  // namespace

TEST_CASE(
    "moe run: torchtitan's MoE configs load unchanged and its two debug configs train 3 steps "
    "from a torchtitan repository layout, and expert parallelism is exit 2 naming the key",
    "[config][torchtitan][moe]") {
  const std::string dir = test::temp_dir("moe_configs");
  fs::create_directories(dir + "/tests/assets/tokenizer");
  test::write_text(dir + "/tests/assets/tokenizer/tokenizer.json",
                   R"({"version": "1.0", "added_tokens": [], "normalizer": null,
          "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1}}})");
  fs::create_directories(dir + "/tests/assets/c4_test");
  std::string docs;
  for (int i = 0; i < 20; ++i) docs += "{\"text\": \"a a b a c a a a\"}\n";
  test::write_text(dir + "/tests/assets/c4_test/data.json", docs);
  // Both debug configs as torchtitan runs them, shortened to 3 steps of 2 x 32 tokens.
  for (const char* file :
       {"torchtitan_qwen3_moe_debug.toml", "torchtitan_deepseek_v3_debug_model.toml"}) {
    INFO(file);
    auto trained =
        test::run_shell("cd " + dir + " && " + test::binary() + " --config " + data_file(file) +
                        " --training.steps 3 --training.seq_len 32 --training.local_batch_size 2 "
                        "--job.dump_folder " +
                        dir + "/" + file + " 2>&1");
    INFO(trained.output);
    CHECK(trained.exit_code == 0);
    CHECK_THAT(trained.output, Catch::Contains("data: c4_test tests/assets/c4_test") &&
                                   Catch::Contains("step:  3") &&
                                   Catch::Contains("moe load (max/mean tokens per expert)"));
  }
  const std::string config = " --config " + data_file("torchtitan_qwen3_moe_debug.toml");
  auto r = test::run_shell("cd " + dir + " && " + test::binary() + config + " --print-config 2>&1");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("flavor = \"debugmodel_moe\"") &&
                           Catch::Contains("selective_ac_option = \"op\""));
  auto ep = test::run_shell("cd " + dir + " && " + test::binary() + config +
                            " --parallelism.expert_parallel_degree 2 --print-config 2>&1");
  CHECK(ep.exit_code == 2);
  CHECK_THAT(ep.output, Catch::Contains("parallelism.expert_parallel_degree") &&
                            Catch::Contains("no expert parallelism yet"));
  // DeepSeek-V3's: the debug model's loads; 16B's only refusal is its expert parallelism, 671B's
  // the Hugging Face download it names.
  auto deepseek = test::run_shell("cd " + dir + " && " + test::binary() + " --config " +
                                  data_file("torchtitan_deepseek_v3_debug_model.toml") +
                                  " --print-config 2>&1");
  CHECK(deepseek.exit_code == 0);
  CHECK_THAT(deepseek.output, Catch::Contains("name = \"deepseek_v3\""));
  const std::string big = " --config " + data_file("torchtitan_deepseek_v3_16b.toml");
  auto ep16 = test::run_titan(big + " --print-config");
  CHECK(ep16.exit_code == 2);
  CHECK_THAT(ep16.output, Catch::Contains("torchtitan_deepseek_v3_16b.toml:54:1: "
                                          "parallelism.expert_parallel_degree: set to 8"));
  for (const auto& [file, assets] :
       {std::pair{"torchtitan_deepseek_v3_16b.toml", "deepseek-moe-16b-base"},
        std::pair{"torchtitan_deepseek_v3_671b.toml", "DeepSeek-V3.1-Base"}}) {
    INFO(file);
    fs::create_directories(dir + "/assets/hf/" + assets);
    fs::copy_file(dir + "/tests/assets/tokenizer/tokenizer.json",
                  dir + "/assets/hf/" + assets + "/tokenizer.json",
                  fs::copy_options::overwrite_existing);
    auto loaded =
        test::run_shell("cd " + dir + " && " + test::binary() + " --config " + data_file(file) +
                        " --parallelism.expert_parallel_degree 1 --print-config 2>&1");
    INFO(loaded.output);
    CHECK(loaded.exit_code == 0);
  }
}

TEST_CASE(
    "moe run: the start-up lines say how it routes and balances, each logged step its load, and "
    "metrics.jsonl the tokens per expert",
    "[moe]") {
  const auto dir = test::temp_dir("moe_lines");
  auto plain = test::run_titan(
      test::tiny_run(dir + "/plain", 2, " --model.name qwen3 --model.flavor tiny_moe"));
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(
      plain.output,
      Catch::Contains("model qwen3 tiny_moe: 214,464 parameters") &&
          Catch::Contains("MoE: 2 of 2 blocks, 8 experts of hidden 32 (top 2, softmax "
                          "scores, route_norm, scores after the experts, 0 shared), "
                          "140,736 parameters active per token") &&
          Catch::Contains("expert_bias is never updated, as torchtitan v0.2.2 trains qwen3") &&
          Catch::Contains("moe load (max/mean tokens per expert): layers.0.moe "));
  // 2 sequences x 16 tokens x top 2 = 64 choices over 8 experts: a mean of 8 per expert.
  CHECK_THAT(test::read_text(dir + "/plain/metrics.jsonl"),
             Catch::Contains("\"moe\": {\"layers.0.moe\": {\"max\": ") &&
                 Catch::Contains("\"mean\": 8, ") &&
                 // Per-layer norms of the experts and the router beside their block's.
                 Catch::Contains("\"0\": {\"grad_norm\": ") &&
                 Catch::Contains("\"0.moe.experts\": {\"grad_norm\": ") &&
                 Catch::Contains("\"1.moe.router\": {\"grad_norm\": "));
  auto balanced = test::run_titan(test::tiny_run(dir + "/balanced", 2, kMoe));
  REQUIRE(balanced.exit_code == 0);
  CHECK_THAT(balanced.output, Catch::Contains("MoE load balancing: expert_bias += 0.001 x "
                                              "sign(mean - count) before each optimizer step"));
  auto forced = test::run_titan(
      test::tiny_run(dir + "/forced", 2, std::string(kMoe) + "--debug.moe_force_load_balance"));
  REQUIRE(forced.exit_code == 0);
  CHECK_THAT(forced.output,
             Catch::Contains("round-robin") &&
                 Catch::Contains("moe load (max/mean tokens per expert): layers.0.moe 1.00  "
                                 "layers.1.moe 1.00"));
}

TEST_CASE(
    "moe run: activation checkpointing none, full, selective and op compute the same step lines "
    "and expert-bias trajectory, for Qwen3-MoE and DeepSeek-V3",
    "[moe][ac]") {
  for (const char* model : {kMoe, " --model.name deepseek_v3 "}) {
    INFO(model);
    const auto dir = test::temp_dir("moe_ac_modes");
    std::string expected;
    for (const char* mode : {"none", "full", "selective", "op"}) {
      INFO(mode);
      const std::string ac = std::string(mode) == "op"
                                 ? "--activation_checkpoint.mode selective "
                                   "--activation_checkpoint.selective_ac_option op"
                                 : std::string("--activation_checkpoint.mode ") + mode +
                                       " --activation_checkpoint.selective_ac_option 2";
      const auto r = test::run_titan(test::tiny_run(
          dir + "/" + mode, 4,
          std::string(model) + ac + " --activation_checkpoint.determinism_check bitwise"));
      REQUIRE(r.exit_code == 0);
      // The params checksum folds in the expert biases: their trajectory is in these lines.
      const auto lines = test::fingerprint_step_lines(dir + "/" + mode + "/fingerprint.log");
      if (expected.empty()) expected = lines;
      CHECK(lines == expected);
    }
  }
}

TEST_CASE(
    "moe run: capture, replay and precision attribution execute a step again from the run's "
    "expert biases, bit for bit",
    "[moe][capture][precision]") {
  const auto dir = test::temp_dir("moe_tools");
  // Step 4 routes with biases three updates have moved.
  auto run = test::run_titan(test::tiny_run(
      dir + "/run", 4, std::string(kMoe) + "--debug.capture_steps 4 --debug.precision_steps 4"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("capture: step 4 in ") &&
                             !Catch::Contains("did not give the run's loss") &&
                             Catch::Contains("(re-execution bitwise the run's: yes)"));
  auto replay = test::run_titan("replay " + dir + "/run/capture/step4");
  INFO(replay.output);
  CHECK(replay.exit_code == 0);
  CHECK_THAT(replay.output, Catch::Contains("bitwise identical: "));
}

TEST_CASE(
    "moe run: the expert biases are saved with the train state, fingerprinted, and a resume "
    "under full AC is bit-exact",
    "[moe][checkpoint]") {
  const std::string run = std::string(kMoe) + "--activation_checkpoint.mode full ";
  const auto straight = test::temp_dir("moe_straight");
  REQUIRE(test::run_titan(test::tiny_run(straight, 6, run)).exit_code == 0);
  const auto dir = test::temp_dir("moe_resumed");
  const std::string flags = test::tiny_run(dir, 6, run + kSaving + "--checkpoint.interval 3");
  REQUIRE(test::run_titan(flags).exit_code == 0);
  const CheckpointContents saved = load_checkpoint(dir + "/checkpoint/step-3");
  REQUIRE(saved.state.model_buffers.count("layers.1.moe.expert_bias"));
  // Three updates of +-0.001 re-centred: the bias has moved.
  CHECK(saved.state.model_buffers.at("layers.1.moe.expert_bias").abs().max().item<float>() > 0);
  // No Hugging Face layout for the experts yet: refused, naming why, before anything is written.
  auto hf = test::run_titan("export " + dir + "/checkpoint/step-3 -o " + dir + "/hf --hf");
  CHECK(hf.exit_code == 2);
  CHECK_THAT(hf.output, Catch::Contains("a Hugging Face checkpoint of Qwen3 (a mixture-of-experts "
                                        "model) cannot be read or written yet"));
  CHECK_FALSE(fs::exists(dir + "/hf"));
  auto hf_save = test::run_titan(
      test::tiny_run(dir + "/hf_save", 1,
                     std::string(kMoe) + "--checkpoint.last_save_in_hf --checkpoint.enable "
                                         "--checkpoint.last_save_model_only --print-config"));
  CHECK(hf_save.exit_code == 2);
  CHECK_THAT(hf_save.output, Catch::Contains("checkpoint.last_save_in_hf: qwen3 tiny_moe is a "
                                             "mixture-of-experts model"));
  fs::remove_all(dir + "/checkpoint/step-6");
  const auto resumed = test::run_titan(flags);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from " + dir + "/checkpoint/step-3"));
  CHECK(test::read_text(dir + "/fingerprint.log") ==
        test::read_text(straight + "/fingerprint.log"));
}

namespace {

// Trains `model` (flags) for 3 batch-invariant steps with full AC checked bitwise on one process,
// then on 2 ranks under FSDP (and, with `replicated`, under replication): every run's step lines
// must be the first's. Returns the first run's output.
std::string check_ranks_agree(const std::string& tag, const std::string& model, bool replicated) {
  const auto dir = test::temp_dir(tag);
  const std::string args = model + test::tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 8"
                           " --activation_checkpoint.mode full"
                           " --activation_checkpoint.determinism_check bitwise";
  const auto one = test::run_titan(test::tiny_run(dir + "/one", 3, args));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const auto expected = test::fingerprint_step_lines(dir + "/one/fingerprint.log");
  REQUIRE_FALSE(expected.empty());
  test::train_ranks(dir, "fsdp", 2, args, 3);
  CHECK(test::fingerprint_step_lines(dir + "/fsdp/fingerprint.log") == expected);
  if (replicated) {
    test::train_ranks(dir, "replicated", 2, args + test::kReplicate, 3);
    CHECK(test::fingerprint_step_lines(dir + "/replicated/fingerprint.log") == expected);
  }
  return one.output;
}

}  // namespace

TEST_CASE(
    "moe run: under batch_invariant the step lines are byte-identical on 1 and 2 ranks, "
    "replicated and FSDP (experts sharded), with full AC checked bitwise",
    "[distributed][moe]") {
  check_ranks_agree("moe_ranks", kMoe, true);
}

TEST_CASE(
    "moe run: DeepSeek-V3 trains with YaRN and load balancing, and its batch-invariant step lines "
    "are byte-identical on 1 and 2 ranks under FSDP, with full AC checked bitwise",
    "[distributed][moe]") {
  // tiny's original_seq_len is 8: YaRN applies at seq_len 16.
  const std::string output =
      check_ranks_agree("deepseek_ranks", " --model.name deepseek_v3 ", false);
  CHECK_THAT(output, Catch::Contains("model deepseek_v3 tiny: 180,096 parameters") &&
                         Catch::Contains("MoE load balancing: expert_bias += 0.001"));
}

}  // namespace titan

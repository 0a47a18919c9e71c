// Qwen3 through the binary: torchtitan's qwen3 configs, batch invariance over ranks with the tied
// output, a tied checkpoint and its resume, and Hugging Face Qwen3 folders both ways.
#include <filesystem>
#include <string>
#include <tuple>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/model_checkpoint.h"
#include "models/registry.h"
#include "test_ranks.h"
#include "test_util.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

const char* const kQwen3 = " --model.name qwen3 ";
const char* const kSaving =
    " --checkpoint.enable --checkpoint.last_save_model_only false --checkpoint.keep_latest_k 0 "
    "--checkpoint.export_dtype float32 ";

std::string data_file(const std::string& name) { return test::source_dir() + "/test/data/" + name; }

// A WordLevel tokenizer.json of a few words in `folder` (made).
void write_tokenizer(const std::string& folder) {
  fs::create_directories(folder);
  test::write_text(folder + "/tokenizer.json",
                   R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
          "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "unk_token": "[UNK]",
                    "vocab": {"[UNK]": 0, "hello": 1, "world": 2}}})");
}

}  // namespace

TEST_CASE(
    "qwen3 run: torchtitan's dense qwen3 configs load, debugmodel trains from torchtitan's layout, "
    "and unknown flavors are exit 2 naming the key",
    "[config][torchtitan]") {
  const std::string dir = test::temp_dir("qwen3_configs");
  for (const auto& [file, flavor, assets] :
       {std::tuple{"torchtitan_qwen3_0.6b.toml", "0.6B", "Qwen3-0.6B"},
        std::tuple{"torchtitan_qwen3_1.7b.toml", "1.7B", "Qwen3-1.7B"},
        std::tuple{"torchtitan_qwen3_32b.toml", "32B", "Qwen3-32B"}}) {
    INFO(file);
    // The Hugging Face download the file names is its only refusal...
    auto absent = test::run_titan("--config " + data_file(file) + " --print-config");
    CHECK(absent.exit_code == 2);
    CHECK_THAT(absent.output,
               Catch::StartsWith(std::string("titan-train: config error: model.hf_assets_path: "
                                             "./assets/hf/") +
                                 assets));
    // ...and where it is, the file loads unchanged.
    write_tokenizer(dir + "/assets/hf/" + assets);
    auto r = test::run_shell("cd " + dir + " && " + test::binary() + " --config " +
                             data_file(file) + " --print-config 2>&1");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("name = \"qwen3\"") &&
                             Catch::Contains(std::string("flavor = \"") + flavor + "\""));
  }
  auto typo = test::run_titan("--model.name qwen3 --model.flavor 0.5B --print-config");
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("\"0.5B\" is not a flavor of model.name \"qwen3\"") &&
                              Catch::Contains("did you mean \"0.6B\"?"));
  // debugmodel trains from a folder laid out as torchtitan's repository, as its debug config runs.
  write_tokenizer(dir + "/tests/assets/tokenizer");
  fs::create_directories(dir + "/tests/assets/c4_test");
  std::string docs;
  for (int i = 0; i < 40; ++i) docs += "{\"text\": \"hello world hello hello world world\"}\n";
  test::write_text(dir + "/tests/assets/c4_test/data.json", docs);
  auto debug = test::run_shell("cd " + dir + " && " + test::binary() +
                               " --model.name qwen3 --model.flavor debugmodel --training.dataset "
                               "c4_test --training.steps 2 --training.seq_len 16 "
                               "--training.local_batch_size 1 --job.dump_folder " +
                               dir + "/debug 2>&1");
  INFO(debug.output);
  CHECK(debug.exit_code == 0);
  CHECK_THAT(debug.output, Catch::Contains("model qwen3 debugmodel: 31,987,968 parameters") &&
                               Catch::Contains("data: c4_test tests/assets/c4_test (1 files, 40") &&
                               Catch::Contains("step:  2"));
  auto other_family = test::run_titan("--model.flavor 0.6B --print-config");
  CHECK(other_family.exit_code == 2);
  CHECK_THAT(other_family.output,
             Catch::Contains("llama3's flavors: tiny, debugmodel, debugmodel_wide, 1B, 8B"));
}

TEST_CASE(
    "qwen3 run: under batch_invariant the tied model's step lines are byte-identical on 1 and 2 "
    "ranks, replicated and FSDP, with activation checkpointing",
    "[distributed]") {
  const auto dir = test::temp_dir("qwen3_ranks");
  const std::string args = kQwen3 + test::tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 8"
                           " --activation_checkpoint.mode full";
  const auto one = test::run_titan(test::tiny_run(dir + "/one", 3, args));
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  CHECK_THAT(one.output, Catch::Contains("model qwen3 tiny: 131,520 parameters"));
  const auto expected = test::fingerprint_step_lines(dir + "/one/fingerprint.log");
  REQUIRE_FALSE(expected.empty());
  test::train_ranks(dir, "fsdp", 2, args, 3);
  CHECK(test::fingerprint_step_lines(dir + "/fsdp/fingerprint.log") == expected);
  test::train_ranks(dir, "fsdp_always", 2,
                    args + " --parallelism.fsdp_reshard_after_forward always", 3);
  CHECK(test::fingerprint_step_lines(dir + "/fsdp_always/fingerprint.log") == expected);
  test::train_ranks(dir, "replicated", 2, args + test::kReplicate, 3);
  CHECK(test::fingerprint_step_lines(dir + "/replicated/fingerprint.log") == expected);
}

TEST_CASE(
    "qwen3 run: a tied model's checkpoint holds the shared tensor once, and a resume is "
    "bit-exact",
    "[checkpoint]") {
  const auto straight = test::temp_dir("qwen3_straight");
  REQUIRE(test::run_titan(test::tiny_run(straight, 6, kQwen3)).exit_code == 0);
  const auto dir = test::temp_dir("qwen3_resumed");
  const std::string flags =
      test::tiny_run(dir, 6, kQwen3 + std::string(kSaving) + "--checkpoint.interval 3");
  REQUIRE(test::run_titan(flags).exit_code == 0);
  const auto saved = load_checkpoint(dir + "/checkpoint/step-3").model;
  int64_t values = 0;
  for (const auto& t : saved) {
    CHECK(t.name != "output.weight");
    values += t.tensor.numel();
  }
  CHECK(values == flavor_args("qwen3", "tiny").num_params());
  fs::remove_all(dir + "/checkpoint/step-6");
  const auto resumed = test::run_titan(flags);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from " + dir + "/checkpoint/step-3"));
  CHECK(test::read_text(dir + "/fingerprint.log") ==
        test::read_text(straight + "/fingerprint.log"));
}

TEST_CASE(
    "qwen3 run: export --hf writes a tied Qwen3 folder that loads back bitwise, trains as the "
    "native checkpoint does, and a config.json of another family or size is exit 2",
    "[hf][checkpoint]") {
  const auto dir = test::temp_dir("qwen3_hf");
  REQUIRE(
      test::run_titan(test::tiny_run(dir + "/run", 2, kQwen3 + std::string(kSaving))).exit_code ==
      0);
  const std::string step = dir + "/run/checkpoint/step-2";
  auto r = test::run_titan("export " + step + " -o " + dir + "/hf --hf");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("as a Hugging Face Qwen3 checkpoint") &&
                           Catch::Contains("lm_head tied to embed_tokens"));
  const std::string config = test::read_text(dir + "/hf/config.json");
  CHECK_THAT(config, Catch::Contains("\"model_type\": \"qwen3\"") &&
                         Catch::Contains("\"Qwen3ForCausalLM\"") &&
                         Catch::Contains("\"tie_word_embeddings\": true") &&
                         Catch::Contains("\"head_dim\": 32"));
  // The HF names, no lm_head, and nothing permuted: the same bits as the native checkpoint.
  ModelArgs args = flavor_args("qwen3", "tiny");
  args.max_seq_len = 16;
  const auto native = load_checkpoint(step).model;
  const auto hf = load_hf_checkpoint(dir + "/hf", args, at::kFloat);
  REQUIRE(hf.size() == native.size());
  for (size_t i = 0; i < hf.size(); ++i) {
    INFO(native[i].name);
    CHECK(hf[i].name == native[i].name);
    CHECK(same_tensor_bits(hf[i].tensor, native[i].tensor));
  }
  CHECK(titan_to_hf_name("layers.1.attention.k_norm.weight") ==
        "model.layers.1.self_attn.k_norm.weight");
  // HF -> titan-train -> HF is byte-identical.
  write_hf_checkpoint(dir + "/again", hf, args, HfWriteOptions{});
  for (const char* file : {"config.json", "model.safetensors"}) {
    INFO(file);
    CHECK(test::read_text(dir + "/hf/" + std::string(file)) ==
          test::read_text(dir + "/again/" + std::string(file)));
  }
  // The same weights through either path train alike.
  const std::string hf_start =
      kQwen3 + std::string("--checkpoint.initial_load_in_hf --checkpoint.initial_load_path ");
  auto from_hf = test::run_titan(test::tiny_run(dir + "/from_hf", 2, hf_start + dir + "/hf"));
  REQUIRE(from_hf.exit_code == 0);
  auto from_native = test::run_titan(test::tiny_run(
      dir + "/from_native", 2, kQwen3 + std::string("--checkpoint.initial_load_path ") + step));
  REQUIRE(from_native.exit_code == 0);
  CHECK(test::run_step_lines(dir + "/from_hf") == test::run_step_lines(dir + "/from_native"));
  // A Llama folder, and a Qwen3 folder of another size, are refused naming both values.
  auto llama = test::run_titan(
      test::tiny_run(dir + "/llama", 2, hf_start + test::source_dir() + "/test/data/hf_tiny"));
  CHECK(llama.exit_code == 2);
  CHECK_THAT(llama.output,
             Catch::Contains("model_type \"llama\" in config.json, \"qwen3\" in the model"));
  CHECK_THAT(llama.output, !Catch::Contains("step:  1"));
  fs::copy(dir + "/hf", dir + "/wide");
  std::string wide = test::read_text(dir + "/wide/config.json");
  wide.replace(wide.find("\"hidden_size\": 64"), 17, "\"hidden_size\": 96");
  fs::remove(dir + "/wide/config.json");
  test::write_text(dir + "/wide/config.json", wide);
  auto sized = test::run_titan(test::tiny_run(dir + "/sized", 2, hf_start + dir + "/wide"));
  CHECK(sized.exit_code == 2);
  CHECK_THAT(sized.output, Catch::Contains("hidden_size 96 in config.json, dim 64 in the model"));
}

}  // namespace titan

namespace titan {

TEST_CASE(
    "qwen3 run: the debugging tools work on Qwen3: the AC checker bitwise (full and op-level), "
    "compare, rerun, precision attribution, capture and replay",
    "[ac][debug]") {
  const auto dir = test::temp_dir("qwen3_tools");
  const auto run = [&](const std::string& name, const std::string& flags) {
    const auto r = test::run_titan(test::tiny_run(dir + "/" + name, 3, kQwen3 + flags));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return r.output;
  };
  const std::string trace = " --debug.numerics_trace ops ";
  run("full", trace +
                  "--activation_checkpoint.mode full --activation_checkpoint.determinism_check "
                  "bitwise");
  run("op",
      trace +
          "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option "
          "op --activation_checkpoint.determinism_check bitwise");
  run("plain", trace);
  for (const char* checkpointed : {"full", "op"}) {
    const auto compared =
        test::run_titan("compare " + dir + "/" + checkpointed + " " + dir + "/plain");
    INFO(compared.output);
    CHECK(compared.exit_code == 0);
    CHECK_THAT(compared.output, Catch::Contains("bitwise identical"));
  }
  CHECK_THAT(run("rerun", "--debug.rerun_steps 2 --debug.rerun_action continue"),
             Catch::Contains("1 reruns"));
  CHECK_THAT(run("precision", "--debug.precision_steps 2"),
             Catch::Contains("precision step 2: float32 against a float64 execution") &&
                 Catch::Contains("re-execution bitwise the run's: yes"));
  run("capture", "--debug.capture_steps 2");
  const auto replayed = test::run_titan("replay " + dir + "/capture/capture/step2");
  INFO(replayed.output);
  CHECK(replayed.exit_code == 0);
}

}  // namespace titan

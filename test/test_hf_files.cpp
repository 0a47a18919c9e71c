// Hugging Face checkpoints that titan-train must refuse, each naming the file: config.json fields
// that do not match the flavor (one at a time), missing, mis-shaped, unknown and misplaced
// tensors, oversized and non-regular files; and the writer's rules for existing folders.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <tuple>

#include "catch_torch.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "test_util.h"
#include "util/error.h"
#include "util/files.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

std::vector<NamedTensor> zeros_for(const ModelArgs& args) {
  std::vector<NamedTensor> out;
  for (const auto& p : model_parameter_shapes(args)) out.push_back({p.name, at::zeros(p.sizes)});
  return out;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// Writes `tensors` (Hugging Face names) as <folder>/<file>.
void write_hf_file(const std::string& path, const std::vector<NamedTensor>& tensors) {
  HashedFileWriter out(path);
  write_safetensors(out, tensors, {{"format", "pt"}});
  out.finish();
}

}  // namespace

TEST_CASE("hf: config.json mismatches are named, each field on its own", "[hf]") {
  const std::string good =
      format_hf_config(hf_config_for(test::tiny_model_args(), at::kFloat, false));
  const auto parse = [](const std::string& text) { return parse_hf_config(text, "config.json"); };
  CHECK(hf_config_mismatches(parse(good), test::tiny_model_args()).empty());
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"\"hidden_size\": 64", "\"hidden_size\": 128", "hidden_size 128 in config.json, dim 64"},
      {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3",
       "num_hidden_layers 3 in config.json, n_layers 2"},
      {"\"num_attention_heads\": 4", "\"num_attention_heads\": 8",
       "num_attention_heads 8 in config.json, n_heads 4"},
      {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4",
       "num_key_value_heads 4 in config.json, n_kv_heads 2"},
      {"\"head_dim\": 16", "\"head_dim\": 32", "head_dim 32 in config.json, dim / n_heads 16"},
      {"\"vocab_size\": 512", "\"vocab_size\": 128256",
       "vocab_size 128256 in config.json, vocab_size 512"},
      {"\"intermediate_size\": 192", "\"intermediate_size\": 256",
       "intermediate_size 256 in config.json, the FFN hidden dim 192"},
      {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-06", "rms_norm_eps 1e-06 in config.json"},
      {"\"rope_theta\": 500000.0", "\"rope_theta\": 10000.0", "rope_theta 10000 in config.json"},
      {"\"factor\": 8.0", "\"factor\": 32.0", "rope_scaling.factor 32 in config.json"},
      {"\"low_freq_factor\": 1.0", "\"low_freq_factor\": 2.0",
       "rope_scaling.low_freq_factor 2 in config.json"},
      {"\"high_freq_factor\": 4.0", "\"high_freq_factor\": 8.0",
       "rope_scaling.high_freq_factor 8 in config.json"},
      {"\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 4096",
       "rope_scaling.original_max_position_embeddings 4096 in config.json"},
      {"\"rope_type\": \"llama3\"", "\"rope_type\": \"linear\"",
       "rope_scaling.rope_type \"linear\" in config.json"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act \"gelu\""},
      {"\"attention_bias\": false", "\"attention_bias\": true", "attention_bias true"},
      {"\"model_type\": \"llama\"", "\"model_type\": \"mistral\"", "model_type \"mistral\""},
  };
  for (const auto& [from, to, named] : cases) {
    INFO(to);
    const auto mismatches =
        hf_config_mismatches(parse(replaced(good, from, to)), test::tiny_model_args());
    REQUIRE(mismatches.size() == 1);
    CHECK_THAT(mismatches[0], Catch::StartsWith(named));
  }
  // Plain RoPE in the file, llama3 scaling in the model; and all mismatches listed at once.
  const auto start = good.find("\"rope_scaling\": {"), end = good.find('}', start);
  const std::string plain = good.substr(0, start) + "\"rope_scaling\": null" + good.substr(end + 1);
  CHECK_THAT(hf_config_mismatches(parse(plain), test::tiny_model_args()).at(0),
             Catch::StartsWith("rope_scaling none in config.json, llama3 in the model"));
  const std::string both = replaced(replaced(good, "\"vocab_size\": 512", "\"vocab_size\": 500"),
                                    "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1");
  const std::string error = test::config_error_message(
      [&] { check_hf_config(parse(both), test::tiny_model_args(), "c.json"); });
  CHECK_THAT(error, Catch::StartsWith("c.json: does not describe this config's model (2 "
                                      "mismatches): num_hidden_layers 1"));
  CHECK_THAT(error, Catch::Contains("; vocab_size 500 in config.json"));
  // transformers 5's spelling: rope_theta inside rope_parameters; kv heads default to heads.
  const std::string v5 = replaced(replaced(replaced(plain, "\"rope_scaling\": null",
                                                    "\"rope_parameters\": {\"rope_type\": "
                                                    "\"llama3\", \"rope_theta\": 500000, "
                                                    "\"factor\": 8, \"low_freq_factor\": 1, "
                                                    "\"high_freq_factor\": 4, "
                                                    "\"original_max_position_embeddings\": "
                                                    "8192}"),
                                           "  \"rope_theta\": 500000.0,\n", ""),
                                  "  \"num_key_value_heads\": 2,\n", "");
  const HfConfig parsed = parse(v5);
  CHECK(parsed.rope_theta == 500000.0);
  CHECK(parsed.num_key_value_heads == 4);
  CHECK(hf_config_mismatches(parsed, test::tiny_model_args()).size() == 1);  // only the kv heads
  CHECK_THAT(test::config_error_message([&] { parse(replaced(good, "\"hidden_size\": 64,", "")); }),
             Catch::Contains("\"hidden_size\" is missing"));
  CHECK_THAT(test::config_error_message([&] { parse("{\"hidden_size\": 64.5}"); }),
             Catch::Contains("must be a non-negative integer"));
  CHECK_THAT(test::config_error_message([&] { parse("{\"hidden_size\": 64"); }),
             Catch::Contains("JSON"));
  CHECK_THAT(test::config_error_message([&] { parse(replaced(good, "\"factor\": 8.0,", "")); }),
             Catch::Contains("llama3 rope scaling needs factor"));
  CHECK(python_float_repr(500000.0) == "500000.0");
  CHECK(python_float_repr(1e-5) == "1e-05");
  CHECK(python_float_repr(0.02) == "0.02");
  CHECK(python_float_repr(1e16) == "1e+16");
}

TEST_CASE("hf: a wrong config.json stops the load before any weight is read", "[hf]") {
  const auto dir = test::temp_dir("hf_config_load");
  HfWriteOptions o;
  write_hf_checkpoint(dir + "/ok", zeros_for(test::tiny_model_args()), test::tiny_model_args(), o);
  ModelArgs other = test::tiny_model_args();
  other.rope_theta = 10000;
  CHECK_THAT(
      test::config_error_message([&] { load_hf_checkpoint(dir + "/ok", other, at::kFloat); }),
      Catch::Contains(dir + "/ok/config.json: does not describe this config's model (1 "
                            "mismatch): rope_theta 500000 in config.json, rope_theta 10000"));
  fs::remove(dir + "/ok/config.json");
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(dir + "/ok", test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(dir + "/ok/config.json: No such file"));
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(dir + "/none", test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(dir + "/none: no such file or folder"));
  fs::create_directories(dir + "/empty");
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(dir + "/empty", test::tiny_model_args(), at::kFloat); }),
             Catch::Contains("holds neither model.safetensors nor model.safetensors.index.json"));
}

TEST_CASE("hf: missing, mis-shaped, unknown and misplaced tensors are refused naming the file",
          "[hf]") {
  const auto dir = test::temp_dir("hf_tensors");
  HfWriteOptions o;
  write_hf_checkpoint(dir + "/src", zeros_for(test::tiny_model_args()), test::tiny_model_args(), o);
  const std::string config = test::read_text(dir + "/src/config.json");
  auto hf = parse_safetensors(test::read_text(dir + "/src/model.safetensors"), "src").tensors;
  int n = 0;
  // A folder with config.json and model.safetensors holding `tensors`; returns its file.
  auto folder_with = [&](const std::vector<NamedTensor>& tensors) {
    const std::string folder = dir + "/case" + std::to_string(n++);
    fs::create_directories(folder);
    test::write_text(folder + "/config.json", config);
    write_hf_file(folder + "/model.safetensors", tensors);
    return folder;
  };
  auto missing = hf;
  missing.erase(missing.begin() + 2);  // layers.0 k_proj
  auto f = folder_with(missing);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(f, test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(f + "/model.safetensors: tensor "
                                 "\"model.layers.0.self_attn.k_proj.weight\" is missing"));
  auto shaped = hf;
  shaped[1].tensor = at::zeros({32, 64});
  f = folder_with(shaped);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(f, test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(f + "/model.safetensors: tensor \"model.layers.0.self_attn.q_proj."
                                 "weight\" has shape [32, 64] there, [64, 64]"));
  auto integer = hf;
  integer[0].tensor = at::zeros({512, 64}, at::kLong);
  f = folder_with(integer);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(f, test::tiny_model_args(), at::kFloat); }),
             Catch::Contains("\"model.embed_tokens.weight\" has dtype Long, not a floating type"));
  auto extra = hf;
  extra.push_back({"model.layers.2.mlp.up_proj.weight", at::zeros({192, 64})});
  f = folder_with(extra);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(f, test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(f + "/model.safetensors: tensor \"model.layers.2.mlp.up_proj.weight\" "
                                 "is not a parameter of this config's model (2 layers)"));
  auto rotary = hf;
  rotary.push_back({"model.layers.1.self_attn.rotary_emb.inv_freq", at::zeros({8})});
  f = folder_with(rotary);
  HfLoadReport report;
  CHECK(load_hf_checkpoint(f, test::tiny_model_args(), at::kFloat, &report).size() == hf.size());
  CHECK_THAT(report.notes.at(0), Catch::Contains("skipped 1 rotary inv_freq table"));

  // Shards: a tensor where the index does not place it, one the index lists but no shard
  // holds, and a shard name that leaves the folder.
  HfWriteOptions sharded;
  sharded.max_shard_bytes = 150000;
  write_hf_checkpoint(dir + "/sharded", zeros_for(test::tiny_model_args()), test::tiny_model_args(),
                      sharded);
  const std::string index_path = dir + "/sharded/model.safetensors.index.json";
  const std::string index = test::read_text(index_path);
  // The shard the index gives a tensor.
  auto shard_of = [&](const std::string& tensor) {
    const std::string key = "\"" + tensor + "\": \"";
    const size_t at = index.find(key) + key.size();
    return index.substr(at, index.find('"', at) - at);
  };
  const std::string first = shard_of("model.embed_tokens.weight");
  const std::string norm = shard_of("model.norm.weight");
  REQUIRE(first != norm);
  test::write_text(index_path, replaced(index, "\"model.norm.weight\": \"" + norm,
                                        "\"model.norm.weight\": \"" + first));
  CHECK_THAT(test::config_error_message([&] {
               load_hf_checkpoint(dir + "/sharded", test::tiny_model_args(), at::kFloat);
             }),
             Catch::Contains(norm +
                             ": holds tensor \"model.norm.weight\", which "
                             "model.safetensors.index.json places in " +
                             first));
  test::write_text(index_path,
                   replaced(index, "\"model.norm.weight\"",
                            "\"model.norm.bias\": \"" + norm + "\",\n    \"model.norm.weight\""));
  CHECK_THAT(test::config_error_message([&] {
               load_hf_checkpoint(dir + "/sharded", test::tiny_model_args(), at::kFloat);
             }),
             Catch::Contains(norm + ": tensor \"model.norm.bias\" is missing "
                                    "(model.safetensors.index.json places it in this file)"));
  test::write_text(index_path, replaced(index, "\"" + first + "\"", "\"../escape\""));
  CHECK_THAT(test::config_error_message([&] {
               load_hf_checkpoint(dir + "/sharded", test::tiny_model_args(), at::kFloat);
             }),
             Catch::Contains(index_path + ": names the shard \"../escape\", not a file beside it"));
}

TEST_CASE("hf: oversized and non-regular files are refused naming the file", "[hf]") {
  const auto dir = test::temp_dir("hf_hostile");
  HfWriteOptions o;
  write_hf_checkpoint(dir + "/big", zeros_for(test::tiny_model_args()), test::tiny_model_args(), o);
  const std::string weights = dir + "/big/model.safetensors";
  // A sparse file: bigger than any tiny model's weights can be, yet no disk space.
  fs::resize_file(weights, hf_max_file_bytes(test::tiny_model_args()) + 1);
  CHECK_THAT(
      test::config_error_message(
          [&] { load_hf_checkpoint(dir + "/big", test::tiny_model_args(), at::kFloat); }),
      Catch::Contains(weights + ": is larger than the " +
                      std::to_string(hf_max_file_bytes(test::tiny_model_args())) + " bytes"));
  fs::remove(weights);
  REQUIRE(::mkfifo(weights.c_str(), 0600) == 0);
  std::string refused;
  try {
    load_hf_checkpoint(dir + "/big", test::tiny_model_args(), at::kFloat);
  } catch (const FileRefused& e) {
    refused = e.where() + ": " + e.message();
  }
  CHECK_THAT(refused, Catch::StartsWith(weights + ": is a FIFO"));
  fs::remove(weights);
  fs::create_directory(weights);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(dir + "/big", test::tiny_model_args(), at::kFloat); }),
             Catch::Contains(weights + ": Is a directory"));
  fs::remove(dir + "/big/config.json");
  REQUIRE(::mkfifo((dir + "/big/config.json").c_str(), 0600) == 0);
  CHECK_THROWS_AS(load_hf_checkpoint(dir + "/big", test::tiny_model_args(), at::kFloat),
                  FileRefused);
}

TEST_CASE("hf: the writer never overwrites, and replaces only a folder of its own", "[hf]") {
  const auto dir = test::temp_dir("hf_writer");
  const auto params = zeros_for(test::tiny_model_args());
  HfWriteOptions o;
  write_hf_checkpoint(dir + "/out", params, test::tiny_model_args(), o);
  CHECK_THAT(test::config_error_message(
                 [&] { write_hf_checkpoint(dir + "/out", params, test::tiny_model_args(), o); }),
             Catch::Contains(dir + "/out: exists"));
  o.replace = true;
  o.dtype = at::kBFloat16;
  write_hf_checkpoint(dir + "/out/", params, test::tiny_model_args(), o);
  CHECK_THAT(test::read_text(dir + "/out/config.json"), Catch::Contains("\"bfloat16\""));
  test::write_text(dir + "/out/notes.txt", "mine");
  CHECK_THAT(test::config_error_message(
                 [&] { write_hf_checkpoint(dir + "/out", params, test::tiny_model_args(), o); }),
             Catch::Contains("holds \"notes.txt\", which a Hugging Face export does not write"));
  CHECK(fs::exists(dir + "/out/notes.txt"));
  test::write_text(dir + "/file", "x");
  CHECK_THROWS_AS(write_hf_checkpoint(dir + "/file", params, test::tiny_model_args(), o),
                  FileRefused);
  fs::create_symlink(dir + "/out", dir + "/link");
  CHECK_THROWS_AS(write_hf_checkpoint(dir + "/link", params, test::tiny_model_args(), o),
                  FileRefused);
  CHECK_THAT(test::config_error_message(
                 [&] { write_hf_checkpoint(".", params, test::tiny_model_args(), o); }),
             Catch::Contains("names no new folder"));
  auto fewer = params;
  fewer.pop_back();
  CHECK_THAT(test::config_error_message(
                 [&] { write_hf_checkpoint(dir + "/new", fewer, test::tiny_model_args(), o); }),
             Catch::Contains("tensor \"output.weight\" is missing"));
  // An abort mid-write leaves neither the folder nor its temporary.
  CHECK_THROWS_AS(write_hf_checkpoint(dir + "/aborted", params, test::tiny_model_args(),
                                      HfWriteOptions{}, [] { return true; }),
                  WriteAborted);
  CHECK_FALSE(fs::exists(dir + "/aborted"));
  CHECK_FALSE(fs::exists(dir + "/.aborted.tmp"));
  for (const auto& e : fs::directory_iterator(dir)) {
    CHECK_FALSE(e.path().filename().string().rfind(".", 0) == 0);  // no temporaries left
  }
}

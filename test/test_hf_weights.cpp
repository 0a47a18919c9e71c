// Hugging Face Llama checkpoints (lib/checkpoint/hf_*.h): names and the q/k permutation both
// ways, byte-identical round trips, sharded against single-file loading, config.json checked
// field by field, bf16/f16 files, and every refusal naming its file.
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "catch_torch.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "llama3/transformer.h"
#include "models/registry.h"
#include "test_util.h"
#include "util/error.h"
#include "util/files.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

// Random parameters of the model `args` builds, float32, output.weight its own.
std::vector<NamedTensor> random_parameters(const ModelArgs& args, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<NamedTensor> out;
  for (const auto& p : model_parameter_shapes(args)) {
    out.push_back({p.name, at::randn(p.sizes, gen, at::TensorOptions().dtype(at::kFloat))});
  }
  return out;
}

std::string bytes_of(const std::string& path) { return test::read_text(path); }

// Every file of two folders, by name, byte for byte.
void check_same_files(const std::string& a, const std::string& b) {
  std::set<std::string> names_a, names_b;
  for (const auto& e : fs::directory_iterator(a)) names_a.insert(e.path().filename().string());
  for (const auto& e : fs::directory_iterator(b)) names_b.insert(e.path().filename().string());
  REQUIRE(names_a == names_b);
  for (const auto& name : names_a) {
    INFO(name);
    CHECK(bytes_of(a + "/" + name) == bytes_of(b + "/" + name));
  }
}

void check_same_tensors(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(a[i].name == b[i].name);
    CHECK(same_tensor_bits(a[i].tensor, b[i].tensor));
  }
}

HfWriteOptions options(at::ScalarType dtype, uint64_t shard_bytes = kHfDefaultShardBytes) {
  HfWriteOptions o;
  o.dtype = dtype;
  o.max_shard_bytes = shard_bytes;
  return o;
}

}  // namespace

TEST_CASE("hf: names map both ways, inv_freq is skipped, others are unknown", "[hf]") {
  for (const char* flavor : {"tiny", "1B"}) {
    for (const auto& p : model_parameter_shapes(flavor_args("llama3", flavor))) {
      INFO(p.name);
      CHECK(hf_to_titan_name(titan_to_hf_name(p.name)) == p.name);
    }
  }
  CHECK(titan_to_hf_name("layers.12.feed_forward.w1.weight") ==
        "model.layers.12.mlp.gate_proj.weight");
  CHECK(titan_to_hf_name("layers.3.feed_forward.w2.weight") ==
        "model.layers.3.mlp.down_proj.weight");
  CHECK(titan_to_hf_name("layers.0.ffn_norm.weight") ==
        "model.layers.0.post_attention_layernorm.weight");
  CHECK(titan_to_hf_name("output.weight") == "lm_head.weight");
  CHECK(is_skipped_hf_tensor("model.layers.7.self_attn.rotary_emb.inv_freq"));
  CHECK_FALSE(hf_to_titan_name("model.layers.7.self_attn.rotary_emb.inv_freq"));
  CHECK_FALSE(hf_to_titan_name("model.layers.07.mlp.up_proj.weight"));  // not layer 7
  CHECK_FALSE(hf_to_titan_name("model.layers.1.mlp.up_proj.bias"));
  CHECK_FALSE(hf_to_titan_name("score.weight"));
  CHECK_THROWS_AS(titan_to_hf_name("layers.0.attention.wz.weight"), std::invalid_argument);
}

TEST_CASE("hf: the q/k permutation is torchtitan's and permute then unpermute is the identity",
          "[hf]") {
  // One head of 4 rows: titan-train's pairs (0,1), (2,3) become halves (0,2 | 1,3).
  const auto rows = at::arange(4, at::kFloat).reshape({4, 1});
  CHECK(at::equal(permute_to_hf(rows, 1).flatten(), at::tensor({0.f, 2.f, 1.f, 3.f})));
  CHECK(at::equal(permute_from_hf(permute_to_hf(rows, 1), 1), rows));
  const ModelArgs a = flavor_args("llama3", "1B");
  for (const int64_t heads : {a.n_heads, a.kv_heads()}) {
    const auto w = at::randn({heads * a.head_dim(), 64});
    CHECK(same_tensor_bits(permute_from_hf(permute_to_hf(w, heads), heads), w));
    CHECK_FALSE(at::equal(permute_to_hf(w, heads), w));
  }
  // What the permutation is for: transformers' rotate-half RoPE on the permuted rows computes
  // the same q as titan-train's interleaved RoPE on the original ones, up to the row order.
  const int64_t H = 2, E = 8, D = 16, T = 5;
  ModelArgs args;
  const auto freqs = precompute_freqs_cis(E, T, args.rope_theta, args.rope_scaling);
  const auto wq = at::randn({H * E, D}), x = at::randn({1, T, D});
  const auto titan_q = apply_rotary_emb(at::matmul(x, wq.t()).view({1, T, H, E}), freqs);
  auto hf_q = at::matmul(x, permute_to_hf(wq, H).t()).view({1, T, H, E});
  const auto angles = at::angle(freqs).view({1, T, 1, E / 2});
  const auto cos = at::cat({at::cos(angles), at::cos(angles)}, -1);
  const auto sin = at::cat({at::sin(angles), at::sin(angles)}, -1);
  const auto halves = hf_q.split(E / 2, -1);
  hf_q = hf_q * cos + at::cat({-halves[1], halves[0]}, -1) * sin;
  const auto back = permute_from_hf(hf_q.reshape({T, H * E}).t(), H).t().reshape({1, T, H, E});
  CHECK(at::allclose(back, titan_q, 1e-5, 1e-6));
}

TEST_CASE("hf: HF -> titan-train -> HF is byte-identical", "[hf]") {
  const auto dir = test::temp_dir("hf_round_trip");
  SECTION("the Python reference's tied, bf16, sharded folder") {
    const std::string source = test::source_dir() + "/test/data/hf_tiny";
    if (!fs::exists(source + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
    HfLoadReport report;
    const auto tensors = load_hf_checkpoint(source, test::tiny_model_args(), at::kFloat, &report);
    CHECK(report.tied);
    CHECK(report.files.size() == 3);
    HfWriteOptions o = options(at::kBFloat16, 100000);  // as scripts/reference wrote it
    o.tie_if_equal = true;
    const auto record = write_hf_checkpoint(dir + "/again", tensors, test::tiny_model_args(), o);
    CHECK(record.tied);
    check_same_files(source, dir + "/again");
  }
  SECTION("untied float32, one file and shards, from random weights") {
    for (const uint64_t shard : {kHfDefaultShardBytes, uint64_t(60000)}) {
      const auto original = random_parameters(test::tiny_model_args(), 3);
      const std::string a = dir + fmt::format("/a{}", shard), b = dir + fmt::format("/b{}", shard);
      const auto first =
          write_hf_checkpoint(a, original, test::tiny_model_args(), options(at::kFloat, shard));
      if (shard == kHfDefaultShardBytes) {
        CHECK(first.files == std::vector<std::string>{"model.safetensors", "config.json"});
      } else {  // shards, the index, config.json
        CHECK(first.files.size() > 4);
        CHECK(first.files[first.files.size() - 2] == "model.safetensors.index.json");
      }
      CHECK_FALSE(first.tied);
      const auto loaded = load_hf_checkpoint(a, test::tiny_model_args(), at::kFloat);
      check_same_tensors(loaded, original);
      write_hf_checkpoint(b, loaded, test::tiny_model_args(), options(at::kFloat, shard));
      check_same_files(a, b);
    }
  }
}

TEST_CASE("hf: sharded and single-file checkpoints load to the same tensors", "[hf]") {
  const auto dir = test::temp_dir("hf_shards");
  const auto original = random_parameters(test::tiny_model_args(), 4);
  write_hf_checkpoint(dir + "/one", original, test::tiny_model_args(), options(at::kBFloat16));
  write_hf_checkpoint(dir + "/many", original, test::tiny_model_args(),
                      options(at::kBFloat16, 40000));
  CHECK(fs::exists(dir + "/one/model.safetensors"));
  CHECK_FALSE(fs::exists(dir + "/one/model.safetensors.index.json"));
  size_t shards = 0;
  for (const auto& e : fs::directory_iterator(dir + "/many")) {
    shards += e.path().extension() == ".safetensors";
  }
  CHECK(shards > 4);
  CHECK(fs::exists(dir + fmt::format("/many/model-00001-of-{:05d}.safetensors", shards)));
  const auto one = load_hf_checkpoint(dir + "/one", test::tiny_model_args(), at::kFloat);
  const auto many = load_hf_checkpoint(dir + "/many/model.safetensors.index.json",
                                       test::tiny_model_args(), at::kFloat);
  check_same_tensors(one, many);
  check_same_tensors(
      one, load_hf_checkpoint(dir + "/one/model.safetensors", test::tiny_model_args(), at::kFloat));
  const std::string index = bytes_of(dir + "/many/model.safetensors.index.json");
  CHECK_THAT(index, Catch::Contains("\"total_size\": " +
                                    std::to_string(test::tiny_model_args().num_params() * 2)));
  CHECK_THAT(index, Catch::Contains(fmt::format(
                        "\"lm_head.weight\": \"model-{0:05d}-of-{0:05d}.safetensors\"", shards)));
}

TEST_CASE("hf: bf16 and f16 files are converted to the training dtype", "[hf]") {
  const auto dir = test::temp_dir("hf_dtypes");
  const auto original = random_parameters(test::tiny_model_args(), 5);
  for (const auto& [dtype, name] :
       {std::pair{at::kBFloat16, "bfloat16"}, std::pair{at::kHalf, "float16"}}) {
    const std::string folder = dir + "/" + name;
    write_hf_checkpoint(folder, original, test::tiny_model_args(), options(dtype));
    CHECK_THAT(bytes_of(folder + "/config.json"),
               Catch::Contains(fmt::format("\"torch_dtype\": \"{}\"", name)));
    auto file = parse_safetensors(bytes_of(folder + "/model.safetensors"), folder);
    CHECK(file.tensors[0].tensor.scalar_type() == dtype);
    for (const auto training : {at::kFloat, at::kBFloat16}) {
      const auto loaded = load_hf_checkpoint(folder, test::tiny_model_args(), training);
      for (size_t i = 0; i < loaded.size(); ++i) {
        INFO(loaded[i].name);
        CHECK(loaded[i].tensor.scalar_type() == training);
        CHECK(at::equal(loaded[i].tensor, original[i].tensor.to(dtype).to(training)));
      }
    }
  }
  CHECK_THROWS_AS(
      write_hf_checkpoint(dir + "/f64", original, test::tiny_model_args(), options(at::kDouble)),
      RuntimeFailure);
  CHECK_FALSE(fs::exists(dir + "/f64"));
}

TEST_CASE("hf: tied embeddings are handled as transformers does", "[hf]") {
  const auto dir = test::temp_dir("hf_tied");
  auto params = random_parameters(test::tiny_model_args(), 6);
  HfWriteOptions tie = options(at::kFloat);
  tie.tie_if_equal = true;
  // Not bitwise equal: lm_head written, not tied.
  auto untied = write_hf_checkpoint(dir + "/untied", params, test::tiny_model_args(), tie);
  CHECK_FALSE(untied.tied);
  CHECK_THAT(bytes_of(dir + "/untied/config.json"),
             Catch::Contains("\"tie_word_embeddings\": false"));
  params.back().tensor = params.front().tensor.clone();  // output == tok_embeddings
  auto tied = write_hf_checkpoint(dir + "/tied", params, test::tiny_model_args(), tie);
  CHECK(tied.tied);
  const auto file = parse_safetensors(bytes_of(dir + "/tied/model.safetensors"), "tied");
  CHECK_FALSE(file.find("lm_head.weight").defined());
  const auto loaded = load_hf_checkpoint(dir + "/tied", test::tiny_model_args(), at::kFloat);
  check_same_tensors(loaded, params);
  // Equal but the flavor does not tie: lm_head is written.
  CHECK_FALSE(
      write_hf_checkpoint(dir + "/equal", params, test::tiny_model_args(), options(at::kFloat))
          .tied);
  CHECK(hf_ties_embeddings("llama3", "1B"));
  CHECK_FALSE(hf_ties_embeddings("llama3", "8B"));

  // tie_word_embeddings with an lm_head.weight in the files: embed_tokens wins, with a note.
  std::string config = bytes_of(dir + "/untied/config.json");
  config.replace(config.find("\"tie_word_embeddings\": false"), 28,
                 "\"tie_word_embeddings\": true");
  test::write_text(dir + "/untied/config.json", config);
  HfLoadReport report;
  const auto overridden =
      load_hf_checkpoint(dir + "/untied", test::tiny_model_args(), at::kFloat, &report);
  CHECK(report.tied);
  CHECK(same_tensor_bits(overridden.back().tensor, overridden.front().tensor));
  REQUIRE(report.notes.size() == 1);
  CHECK_THAT(report.notes[0], Catch::Contains("lm_head.weight differs from model.embed_tokens"));
  // No lm_head.weight and no tie: missing.
  config.replace(config.find("\"tie_word_embeddings\": true"), 27,
                 "\"tie_word_embeddings\": false");
  test::write_text(dir + "/tied/config.json", config);
  CHECK_THAT(test::config_error_message(
                 [&] { load_hf_checkpoint(dir + "/tied", test::tiny_model_args(), at::kFloat); }),
             Catch::Contains("tensor \"lm_head.weight\" is missing (config.json does not set "
                             "tie_word_embeddings)"));
}

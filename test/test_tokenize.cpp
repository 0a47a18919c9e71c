// model.hf_assets_path's tokenizer in training (data/text_encoding.h) and `titan-train tokenize`:
// text documents become the tokenizer's ids with BOS and EOS, the subcommand writes exactly the
// stream the loader reads, and training from that stream gives the same bits.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "catch_torch.h"
#include "test_util.h"
#include "tokenizer/tiktoken_file.h"

using namespace titan;
using Json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

constexpr int kBos = 1, kEos = 2, kFirstWord = 3;

std::string word(int i) { return fmt::format("w{}", i); }

// A WordLevel tokenizer over whitespace-split words w0..w<words-1> (ids 3...), with <s> and </s>
// as BOS and EOS (tokenizer_config.json), as torchtitan infers them; `edit` may change its
// tokenizer.json before it is written.
std::string tokenizer_folder(const std::string& tag, int words,
                             const std::function<void(Json&)>& edit = {}) {
  Json vocab = {{"[UNK]", 0}, {"<s>", kBos}, {"</s>", kEos}};
  for (int i = 0; i < words; ++i) vocab[word(i)] = kFirstWord + i;
  Json tokenizer = {{"version", "1.0"},
                    {"truncation", nullptr},
                    {"padding", nullptr},
                    {"added_tokens", Json::array()},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                    {"post_processor", nullptr},
                    {"decoder", nullptr},
                    {"model", {{"type", "WordLevel"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}}};
  if (edit) edit(tokenizer);
  const std::string dir = test::temp_dir(tag);
  test::write_text(dir + "/tokenizer.json", tokenizer.dump());
  test::write_text(dir + "/tokenizer_config.json",
                   Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}.dump());
  return dir;
}

// 40 documents of 6-14 words from w0..w99 as jsonl; `expected` gets the stream the loader should
// read: per document BOS, the words' ids, EOS.
std::string corpus(const std::string& dir, std::vector<uint32_t>& expected) {
  std::string text;
  uint64_t state = 7;
  for (int d = 0; d < 40; ++d) {
    std::string doc;
    expected.push_back(kBos);
    const int n = 6 + d % 9;
    for (int w = 0; w < n; ++w) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int i = static_cast<int>((state >> 33) % 100);
      doc += (w ? " " : "") + word(i);
      expected.push_back(static_cast<uint32_t>(kFirstWord + i));
    }
    expected.push_back(kEos);
    text += Json{{"text", doc}}.dump() + "\n";
  }
  return test::write_text(dir + "/docs.jsonl", text);
}

std::vector<uint32_t> read_uint32(const std::string& path) {
  const std::string bytes = test::read_text(path);
  std::vector<uint32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

TEST_CASE(
    "tokenizer in training: documents are the tokenizer's ids with BOS and EOS, tokenize "
    "writes that stream, and training from it gives the same bits",
    "[tokenizer][data]") {
  const std::string dir = test::temp_dir("tokenize");
  const std::string assets = tokenizer_folder("tokenize_assets", 100);
  std::vector<uint32_t> expected;
  const std::string docs = corpus(dir, expected);
  const std::string text_flags = "--model.flavor tiny --model.hf_assets_path " + assets +
                                 " --training.dataset jsonl --training.dataset_path " + docs;

  auto r = test::run_titan("tokenize " + text_flags + " -o " + dir + "/out.bin");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(fmt::format("wrote {} tokens", expected.size())));
  CHECK(read_uint32(dir + "/out.bin") == expected);

  const std::string from_text = dir + "/from_text", from_tokens = dir + "/from_tokens",
                    bytewise = dir + "/bytewise";
  auto a = test::run_titan(test::tiny_run(from_text, 4, text_flags));
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("tokenizer: tokenizer.json from " + assets));
  auto b = test::run_titan(test::tiny_run(
      from_tokens, 4,
      "--model.hf_assets_path '' --training.dataset tokens --training.dataset_token_dtype uint32 "
      "--training.dataset_path " +
          dir + "/out.bin"));
  REQUIRE(b.exit_code == 0);
  CHECK(test::run_step_lines(from_text) == test::run_step_lines(from_tokens));
  CHECK_FALSE(test::run_step_lines(from_text).empty());
  CHECK_THAT(test::read_text(from_text + "/fingerprint.log"),
             Catch::Contains("\ntokenizer " + assets + "/tokenizer.json "));
  CHECK_THAT(test::read_text(from_tokens + "/fingerprint.log"), !Catch::Contains("\ntokenizer "));

  auto c = test::run_titan(test::tiny_run(
      bytewise, 4,
      "--model.hf_assets_path '' --training.dataset jsonl --training.dataset_path " + docs));
  REQUIRE(c.exit_code == 0);
  CHECK(test::run_step_lines(bytewise) != test::run_step_lines(from_text));

  // An existing output is kept unless --force, and an input is never an output.
  auto again = test::run_titan("tokenize " + text_flags + " -o " + dir + "/out.bin");
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.output, Catch::Contains("exists"));
  CHECK(test::run_titan("tokenize " + text_flags + " -o " + dir + "/out.bin --force").exit_code ==
        0);
  const std::string docs_text = test::read_text(docs);
  for (const std::string& input : {docs, assets + "/tokenizer.json"}) {
    auto self = test::run_titan("tokenize " + text_flags + " -o " + input + " --force");
    INFO(self.output);
    CHECK(self.exit_code == 2);
    CHECK_THAT(self.output, Catch::Contains(input + ": is an input of the command"));
  }
  CHECK(test::read_text(docs) == docs_text);
}

TEST_CASE(
    "tokenize: SIGTERM between documents is exit 143 naming the output, which is left unwritten "
    "with no temporary file",
    "[tokenizer][data]") {
  const std::string dir = test::temp_dir("tokenize_stop");
  {
    std::ofstream docs(dir + "/docs.jsonl");
    for (int i = 0; i < 120000; ++i) docs << "{\"text\": \"words of document " << i << " ...\"}\n";
  }
  const std::string out = dir + "/out.bin";
  std::string output;
  for (int attempt = 0; attempt < 3; ++attempt) {  // a tokenize that ended first is a missed moment
    fs::remove(out);
    output = test::run_shell(test::binary() +
                             " tokenize --model.flavor tiny --model.hf_assets_path '' "
                             "--training.dataset jsonl --training.dataset_path " +
                             dir + "/docs.jsonl -o " + out + " >" + dir +
                             "/log 2>&1 & p=$!; while kill -0 $p 2>/dev/null; do "
                             "[ -e " +
                             out + ".tmp ] && break; done; kill -TERM $p; wait $p; echo \"rc=$?\"")
                 .output;
    if (output != "rc=0\n") break;
  }
  const std::string log = test::read_text(dir + "/log");
  INFO(output << log);
  CHECK(output == "rc=143\n");
  CHECK_THAT(log, Catch::Contains("tokenize stopped by SIGTERM after "));
  CHECK_THAT(log, Catch::Contains(out + " is not written"));
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(out + ".tmp"));
}

TEST_CASE(
    "tokenizer in training: an id the tokenizer can emit at or past the flavor's vocab_size (a "
    "vocabulary with gaps, a post-processor's special token) is exit 2 before any output, "
    "naming the id and what gives it, also for the validation set",
    "[tokenizer][data]") {
  const std::string dir = test::temp_dir("tokenize_ids");
  std::vector<uint32_t> expected;
  const std::string docs = corpus(dir, expected);  // never uses the far ids below
  const std::string jsonl = " --training.dataset jsonl --training.dataset_path " + docs;
  // 103 + 1 tokens, well under tiny's 512, but one of them has id 5000.
  const std::string gap =
      tokenizer_folder("tokenize_gap", 100, [](Json& t) { t["model"]["vocab"]["far"] = 5000; });
  // A template that adds a special token of id 99999 in front of each document.
  const std::string special = tokenizer_folder("tokenize_special", 100, [](Json& t) {
    t["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", Json::array({Json{{"SpecialToken", {{"id", "<cls>"}, {"type_id", 0}}}},
                                Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", Json::array({Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens",
         {{"<cls>", {{"id", "<cls>"}, {"ids", {99999}}, {"tokens", {"<cls>"}}}}}}};
  });
  const std::string validation =
      " --training.dataset synthetic --validation.enable --validation.freq 1 --validation.seq_len "
      "16 "
      "--validation.steps 1 --validation.dataset jsonl "
      "--validation.dataset_path " +
      docs;
  for (const auto& [folder, data, wanted] :
       {std::tuple{gap, jsonl, std::string("can emit id 5000 (vocabulary token \"far\")")},
        std::tuple{special, jsonl,
                   std::string("can emit id 99999 (a special token of the post-processor)")},
        std::tuple{gap, validation, std::string("can emit id 5000")}}) {
    const std::string run = test::temp_dir("tokenize_ids_run") + "/run";
    const auto r =
        test::run_titan(test::tiny_run(run, 2, "--model.hf_assets_path " + folder + data));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(wanted) && Catch::Contains("vocab_size 512"));
    CHECK_FALSE(std::filesystem::exists(run));
  }
  // A rank file's largest rank, past its count of ranks.
  // Every byte (a rank file must rank them all) at its own value, then "ab" at 100000.
  const std::string base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string ranks;
  for (int b = 0; b < 256; ++b) {
    ranks += fmt::format("{}{}== {}\n", base64[b >> 2], base64[(b & 3) << 4], b);
  }
  test::write_text(dir + "/ranks.tiktoken", ranks + "YWI= 100000\n");
  const auto tok = load_tiktoken_file(dir + "/ranks.tiktoken", false);
  CHECK(tok->vocab_size() == 257);
  CHECK(tok->largest_id() == 100000);
}

TEST_CASE(
    "tokenizer in training: a folder without a tokenizer, a vocabulary larger than the "
    "flavor's and a non-text dataset are exit 2 before any output, torchtitan's absent "
    "default folder keeps bytes with a note",
    "[tokenizer][data]") {
  const std::string dir = test::temp_dir("tokenize_refused");
  std::vector<uint32_t> expected;
  const std::string docs = corpus(dir, expected);
  const std::string jsonl = " --training.dataset jsonl --training.dataset_path " + docs;

  const std::string empty = test::temp_dir("tokenize_empty");
  auto r =
      test::run_titan(test::tiny_run(dir + "/run1", 2, "--model.hf_assets_path " + empty + jsonl));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(empty));
  CHECK_THAT(r.output, Catch::Contains("tokenizer.json"));
  CHECK_FALSE(std::filesystem::exists(dir + "/run1/fingerprint.log"));

  const std::string big = tokenizer_folder("tokenize_big", 600);
  r = test::run_titan(test::tiny_run(dir + "/run2", 2, "--model.hf_assets_path " + big + jsonl));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("has 603 tokens") && Catch::Contains("vocab_size 512"));
  CHECK_FALSE(std::filesystem::exists(dir + "/run2/fingerprint.log"));

  r = test::run_titan("tokenize --model.flavor tiny -o " + dir + "/x.bin");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("\"synthetic\" is not a text dataset"));
  CHECK_FALSE(std::filesystem::exists(dir + "/x.bin"));

  // The tests run where ./tests/assets/tokenizer does not exist.
  r = test::run_titan(test::tiny_run(dir + "/run3", 1, jsonl));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("there is no such folder: text is tokenized bytewise"));
}

TEST_CASE(
    "tokenizer in training: the vocab.json + merges.txt fallback trains, tokenizes and "
    "validates, fingerprint.log hashing both files",
    "[tokenizer][data]") {
  const std::string assets = test::temp_dir("vocab_merges_assets");
  // A byte-level BPE ("Ġ" is the space byte): "hello" is one token after four merges.
  test::write_text(assets + "/vocab.json", Json{{"[UNK]", 0},
                                                {"<s>", kBos},
                                                {"</s>", kEos},
                                                {"h", 3},
                                                {"e", 4},
                                                {"l", 5},
                                                {"o", 6},
                                                {"\xC4\xA0", 7},
                                                {"he", 8},
                                                {"ll", 9},
                                                {"hell", 10},
                                                {"hello", 11}}
                                               .dump());
  test::write_text(assets + "/merges.txt", "#version: 0.2\nh e\nl l\nhe ll\nhell o\n");
  test::write_text(assets + "/tokenizer_config.json",
                   Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}.dump());
  const std::string dir = test::temp_dir("vocab_merges");
  std::string docs;
  std::vector<uint32_t> expected;
  for (int d = 0; d < 60; ++d) {
    std::string doc = "hello";
    expected.insert(expected.end(), {kBos, 11});
    for (int w = 0; w < d % 7; ++w) {
      doc += " hello";
      expected.insert(expected.end(), {7, 11});
    }
    expected.push_back(kEos);
    docs += Json{{"text", doc}}.dump() + "\n";
  }
  const std::string path = test::write_text(dir + "/docs.jsonl", docs);
  const std::string flags = "--model.hf_assets_path " + assets +
                            " --training.dataset jsonl --training.dataset_path " + path;

  auto tokenized =
      test::run_titan("tokenize --model.flavor tiny " + flags + " -o " + dir + "/o.bin");
  INFO(tokenized.output);
  REQUIRE(tokenized.exit_code == 0);
  CHECK(read_uint32(dir + "/o.bin") == expected);

  auto trained = test::run_titan(test::tiny_run(
      dir + "/run", 2,
      flags +
          " --validation.enable --validation.freq 1 --validation.steps 1 --validation.seq_len 16 "
          "--validation.dataset jsonl --validation.dataset_path " +
          path));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.output, Catch::Contains("vocab.json+merges.txt (BPE) from " + assets +
                                             "/vocab.json + " + assets + "/merges.txt"));
  CHECK_THAT(trained.output, Catch::Contains("validation"));
  const std::string fingerprint = test::read_text(dir + "/run/fingerprint.log");
  CHECK_THAT(fingerprint, Catch::Contains("\ntokenizer " + assets + "/vocab.json "));
  CHECK_THAT(fingerprint, Catch::Contains(" " + assets + "/merges.txt "));
}

// The tokenizer's contracts that need no reference implementation: special-token matching,
// refusals (unknown components, bounds, malformed files), NFD and NFC on hand-picked text,
// torchtitan's BOS/EOS inference, the vocab-file fallbacks, invalid UTF-8, and Llama 3 rank files.
// The ids against Hugging Face tokenizers and tiktoken on the whole corpus are in
// test_tokenizer_oracle.cpp.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "catch_torch.h"
#include "test_util.h"
#include "tokenizer/normal_form.h"
#include "tokenizer/tokenizer_loader.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

using namespace titan;
using titan::test::temp_dir;
using titan::test::write_text;
using Json = nlohmann::json;

namespace {

// A small tokenizer.json: a WordLevel model over whitespace-split words, with `added` tokens.
Json word_level(const Json& added = Json::array()) {
  return Json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
      {"post_processor", nullptr},
      {"decoder", nullptr},
      {"model",
       {{"type", "WordLevel"},
        {"unk_token", "[UNK]"},
        {"vocab", {{"[UNK]", 0}, {"x", 1}, {"y", 2}, {"lord", 3}, {"<s>", 4}, {"</s>", 5}}}}}};
}

Json added_token(int id, const std::string& content, bool special, bool normalized,
                 bool single_word = false, bool lstrip = false, bool rstrip = false) {
  return Json{{"id", id},          {"content", content}, {"single_word", single_word},
              {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
              {"special", special}};
}

std::string folder_with(const std::string& tag, const Json& tokenizer,
                        const Json& config = Json()) {
  const std::string dir = temp_dir(tag);
  write_text(dir + "/tokenizer.json", tokenizer.dump());
  if (!config.is_null()) write_text(dir + "/tokenizer_config.json", config.dump());
  return dir;
}

// The ConfigError load_tokenizer(dir) throws (fails the test when it throws none).
ConfigError load_error(const std::string& dir) {
  try {
    load_tokenizer(dir);
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("load_tokenizer(" << dir << ") threw no ConfigError");
  return ConfigError("", "");
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

}  // namespace

TEST_CASE("Special-token strings in text are matched where HF matches them", "[tokenizer]") {
  const Json added = {added_token(6, "<|eot|>", true, false),
                      added_token(7, "[M]", false, true, false, true, true),
                      added_token(3, "lord", false, false, true)};
  const auto tok = load_tokenizer(folder_with("tok_special", word_level(added)));
  // Inside a word, next to spaces, twice in a row; a partial string is text.
  CHECK(tok->encode("x<|eot|>y") == ids({1, 6, 2}));
  CHECK(tok->encode("x <|eot|><|eot|> y") == ids({1, 6, 6, 2}));
  CHECK(tok->encode("x<|eot| y") == ids({0, 2}));
  // lstrip/rstrip take the spaces around [M]; single_word "lord" only as a whole word.
  CHECK(tok->encode("x  [M]  y") == ids({1, 7, 2}));
  CHECK(tok->encode("lord overlord lordx") == ids({3, 0, 0}));
  // Added ids follow HF: "lord" keeps the model's 3, a new token gets the next id after the
  // vocabulary (6, 7), whatever the file's "id" says.
  CHECK(tok->vocab_size() == 8);
}

TEST_CASE("A component titan does not implement is a ConfigError naming it and the file",
          "[tokenizer]") {
  struct Case {
    const char* key;
    Json value;
    const char* name;
  };
  const std::vector<Case> cases = {
      {"normalizer", {{"type", "NFKC"}}, "NFKC"},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}, "BertPreTokenizer"},
      {"post_processor", {{"type", "SomethingNew"}}, "SomethingNew"},
      {"model", {{"type", "Unigram"}, {"vocab", Json::array()}}, "Unigram"},
      {"truncation", {{"max_length", 8}}, "truncation"},
  };
  for (const Case& c : cases) {
    Json t = word_level();
    t[c.key] = c.value;
    const std::string dir = folder_with("tok_unknown", t);
    const ConfigError e = load_error(dir);
    INFO(e.where() << ": " << e.message());
    CHECK_THAT(e.where(), Catch::Contains(dir + "/tokenizer.json"));
    CHECK_THAT(e.where() + " " + e.message(), Catch::Contains(c.name));
    CHECK_FALSE(e.hint().empty());
  }
}

TEST_CASE(
    "Normalizers that could grow a text beyond 64-fold (nested Replace) are refused at load, "
    "naming the file, and SentencePiece's Prepend and Replace load and apply",
    "[tokenizer]") {
  auto replace = [](const std::string& from, const std::string& to) {
    return Json{{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
  };
  Json nested = word_level();
  nested["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", {replace("x", "xxxxxxxxxx"), replace("x", "xxxxxxxxxx")}}};
  const std::string dir = folder_with("tok_growth", nested);
  const ConfigError e = load_error(dir);
  CHECK_THAT(e.where(), Catch::Contains(dir + "/tokenizer.json"));
  CHECK_THAT(e.message(), Catch::Contains("grow a text up to 100-fold"));
  // A regex may match the empty string: its content could go between every two bytes.
  Json regex = word_level();
  regex["normalizer"] = {
      {"type", "Replace"}, {"pattern", {{"Regex", "y*"}}}, {"content", std::string(64, 'x')}};
  CHECK_THAT(load_error(folder_with("tok_growth_regex", regex)).message(),
             Catch::Contains("65-fold"));
  Json sentencepiece = word_level();
  sentencepiece["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace(" ", "\u2581")}}};
  sentencepiece["pre_tokenizer"] = nullptr;
  sentencepiece["model"]["vocab"]["\u2581x\u2581y"] = 6;
  const auto tok = load_tokenizer(folder_with("tok_sentencepiece", sentencepiece));
  CHECK(tok->encode("x y") == ids({6}));
}

TEST_CASE(
    "NFD and NFC give the code points Unicode prescribes: reordering by combining class, "
    "composition exclusions, singletons, Hangul by formula, blocked marks",
    "[tokenizer]") {
  using CodePoints = std::vector<uint32_t>;
  const auto utf8 = [](const CodePoints& cps) {
    std::string s;
    for (uint32_t c : cps) append_utf8(c, s);
    return s;
  };
  const auto code_points = [](const std::string& s) {
    CodePoints cps;
    for (size_t i = 0; i < s.size();) cps.push_back(next_code_point(s, i));
    return cps;
  };
  struct Case {
    CodePoints text, nfd, nfc;
  };
  const std::vector<Case> cases = {
      {{0x65, 0x301}, {0x65, 0x301}, {0xE9}},
      {{0x73, 0x307, 0x323}, {0x73, 0x323, 0x307}, {0x1E69}},  // dot below (220) first
      {{0xC5, 0x323}, {0x41, 0x323, 0x30A}, {0x1EA0, 0x30A}},  // no A + dot below + ring
      {{0x56, 0x69, 0x65, 0x302, 0x323, 0x74},                 // Vietnamese "Việt", marks swapped
       {0x56, 0x69, 0x65, 0x323, 0x302, 0x74},
       {0x56, 0x69, 0x1EC7, 0x74}},
      {{0x1F82}, {0x3B1, 0x313, 0x300, 0x345}, {0x1F82}},   // three marks, recomposed
      {{0x212B}, {0x41, 0x30A}, {0xC5}},                    // singleton ANGSTROM SIGN
      {{0xF900}, {0x8C48}, {0x8C48}},                       // CJK compatibility ideograph
      {{0x2F800}, {0x4E3D}, {0x4E3D}},                      // ... supplementary
      {{0x958}, {0x915, 0x93C}, {0x915, 0x93C}},            // composition exclusion
      {{0x1D15E}, {0x1D157, 0x1D165}, {0x1D157, 0x1D165}},  // ... outside the BMP
      {{0x344}, {0x308, 0x301}, {0x308, 0x301}},            // non-starter decomposition
      {{0xF73, 0xF72}, {0xF71, 0xF72, 0xF72}, {0xF71, 0xF72, 0xF72}},
      {{0x1100, 0x1161, 0x11A8}, {0x1100, 0x1161, 0x11A8}, {0xAC01}},  // Hangul L+V+T
      {{0xD4DB}, {0x1111, 0x1171, 0x11B6}, {0xD4DB}},                  // the last LVT syllable
      {{0xAC00, 0x11A7}, {0x1100, 0x1161, 0x11A7}, {0xAC00, 0x11A7}},  // U+11A7 is no T
      {{0x1100, 0x1176}, {0x1100, 0x1176}, {0x1100, 0x1176}},          // old vowel: no syllable
      {{0x61, 0x334, 0x301}, {0x61, 0x334, 0x301}, {0xE1, 0x334}},     // overlay (1) blocks not
      {{0x65, 0x301, 0x301}, {0x65, 0x301, 0x301}, {0xE9, 0x301}},     // equal class blocks
      {{0x61, 0x363, 0x301}, {0x61, 0x363, 0x301}, {0x61, 0x363, 0x301}},
      {{0x61, 0x316, 0x301}, {0x61, 0x316, 0x301}, {0xE1, 0x316}},     // a lower class does not
      {{0x301, 0x61}, {0x301, 0x61}, {0x301, 0x61}},                   // no starter before
      {{0xB47, 0xB3E, 0xB57}, {0xB47, 0xB3E, 0xB57}, {0xB4B, 0xB57}},  // two starters compose
      {{0x11099, 0x110BA}, {0x11099, 0x110BA}, {0x1109A}},
      {{0x61, 0x62, 0xC0, 0x323}, {0x61, 0x62, 0x41, 0x323, 0x300}, {0x61, 0x62, 0x1EA0, 0x300}},
      {{0x61, 0x20, 0x7A}, {0x61, 0x20, 0x7A}, {0x61, 0x20, 0x7A}},
  };
  for (const Case& c : cases) {
    INFO("text " << utf8(c.text));
    std::string nfd = utf8(c.text), nfc = utf8(c.text);
    to_normal_form(nfd, NormalForm::NFD);
    to_normal_form(nfc, NormalForm::NFC);
    CHECK(code_points(nfd) == c.nfd);
    CHECK(code_points(nfc) == c.nfc);
  }
  // A long run of marks is sorted in one go (a mark-by-mark insertion would take quadratic time).
  CodePoints marks = {0x61}, sorted = {0x61};
  for (int i = 0; i < 100000; ++i) marks.insert(marks.end(), {0x301, 0x316});
  sorted.insert(sorted.end(), 100000, 0x316);
  sorted.insert(sorted.end(), 100000, 0x301);
  std::string run = utf8(marks);
  to_normal_form(run, NormalForm::NFD);
  CHECK(code_points(run) == sorted);
  // Through tokenizer.json: "NFC" and "NFD" load and normalize before the model.
  for (const char* form : {"NFC", "NFD"}) {
    Json t = word_level();
    t["normalizer"] = {{"type", form}};
    t["model"]["vocab"]["\u00E9"] = 6;
    t["model"]["vocab"]["e\u0301"] = 7;
    const auto tok = load_tokenizer(folder_with("tok_normal_form", t));
    CHECK(tok->encode("e\u0301 \u00E9") == (form[2] == 'C' ? ids({6, 6}) : ids({7, 7})));
  }
}

TEST_CASE("tokenizer.json is bounded: size, file type, nesting, syntax", "[tokenizer]") {
  SECTION("larger than the bound (a sparse file: nothing is read)") {
    const std::string dir = temp_dir("tok_big");
    const std::string path = dir + "/tokenizer.json";
    write_text(path, "{}");
    REQUIRE(::truncate(path.c_str(), off_t(kMaxTokenizerFileBytes) + 1) == 0);
    const ConfigError e = load_error(dir);
    CHECK(e.where() == path);
    CHECK_THAT(e.message(), Catch::Contains("larger than"));
  }
  SECTION("a folder or a FIFO named tokenizer.json is refused without blocking") {
    const std::string dir = temp_dir("tok_fifo");
    std::filesystem::create_directory(dir + "/tokenizer.json");
    CHECK_THAT(load_error(dir).message(),
               Catch::Contains("not a regular file") || Catch::Contains("directory"));
    const std::string dir2 = temp_dir("tok_fifo2");
    REQUIRE(::mkfifo((dir2 + "/tokenizer.json").c_str(), 0600) == 0);
    CHECK_THAT(load_error(dir2).message(), Catch::Contains("FIFO"));
  }
  SECTION("nesting deeper than the bound") {
    const std::string dir = temp_dir("tok_deep");
    write_text(dir + "/tokenizer.json", std::string(100000, '[') + std::string(100000, ']'));
    const ConfigError e = load_error(dir);
    CHECK_THAT(e.message(), Catch::Contains("nested deeper"));
    CHECK_THAT(e.where(), Catch::Contains("tokenizer.json:1:65"));
  }
  SECTION("a syntax error names line and column") {
    const std::string dir = temp_dir("tok_syntax");
    write_text(dir + "/tokenizer.json", "{\n  \"version\": \"1.0\",\n  \"model\": [1, 2,]\n}");
    const ConfigError e = load_error(dir);
    CHECK_THAT(e.where(), Catch::EndsWith("tokenizer.json:3:18"));
    CHECK_THAT(e.message(), Catch::StartsWith("malformed JSON"));
  }
}

TEST_CASE("BOS/EOS come from tokenizer_config.json as torchtitan infers them", "[tokenizer]") {
  Json t = word_level({added_token(4, "<s>", true, false), added_token(5, "</s>", true, false)});
  t["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {4}}, {"tokens", {"<s>"}}}}}}};
  SECTION("the post-processor adds BOS; EOS is added by encode_for_training") {
    const auto tok = load_tokenizer(
        folder_with("tok_bos", t, {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}}}}));
    CHECK(tok->bos_id() == 4);
    CHECK(tok->eos_id() == 5);
    CHECK(tok->info().hf_adds_bos);
    CHECK_FALSE(tok->info().hf_adds_eos);
    CHECK(tok->encode("x y") == ids({1, 2}));
    CHECK(tok->encode_with_special_tokens("x y") == ids({4, 1, 2}));
    CHECK(tok->encode_for_training("x y", true, true) == ids({4, 1, 2, 5}));
    CHECK(tok->encode_for_training("x y", false, false) == ids({4, 1, 2}));
    CHECK_THAT(tok->describe(), Catch::Contains("bos 4 (<s>) (added by the post-processor)"));
  }
  SECTION("no post-processor: both added by encode_for_training; add_*_token read") {
    t["post_processor"] = nullptr;
    const auto tok = load_tokenizer(folder_with("tok_bos2", t,
                                                {{"bos_token", "<s>"},
                                                 {"eos_token", "</s>"},
                                                 {"add_bos_token", true},
                                                 {"add_eos_token", false}}));
    CHECK_FALSE(tok->info().hf_adds_bos);
    CHECK(tok->info().default_add_bos);
    CHECK_FALSE(tok->info().default_add_eos);
    CHECK(tok->encode_for_training("x", true, true) == ids({4, 1, 5}));
  }
  SECTION("the same string for BOS and EOS sets only BOS (torchtitan's elif)") {
    const auto tok =
        load_tokenizer(folder_with("tok_same", t, {{"bos_token", "</s>"}, {"eos_token", "</s>"}}));
    CHECK(tok->bos_id() == 5);
    CHECK_FALSE(tok->eos_id().has_value());
  }
  SECTION("a config token the tokenizer lacks is added with the next id") {
    const auto tok =
        load_tokenizer(folder_with("tok_pad", t, {{"bos_token", "<s>"}, {"pad_token", "<pad>"}}));
    CHECK(tok->vocab_size() == 7);
    CHECK(tok->encode("x <pad> y") == ids({1, 6, 2}));
  }
  SECTION("added_tokens_decoder entries are added in file order (new tokens' ids)") {
    const std::string dir = temp_dir("tok_order");
    write_text(dir + "/tokenizer.json", t.dump());
    write_text(
        dir + "/tokenizer_config.json",
        R"({"added_tokens_decoder": {"20": {"content": "<b>"}, "100": {"content": "<a>"}}})");
    const auto tok = load_tokenizer(dir);
    CHECK(tok->encode("<a> <b>") == ids({7, 6}));
  }
  SECTION("a token object without content is refused, naming the key") {
    const std::string dir = folder_with("tok_badcfg", t, {{"bos_token", {{"lstrip", true}}}});
    const ConfigError e = load_error(dir);
    CHECK_THAT(e.where(), Catch::Contains("tokenizer_config.json: bos_token"));
  }
  SECTION("without tokenizer_config.json there is no BOS or EOS") {
    const auto tok = load_tokenizer(folder_with("tok_nocfg", t));
    CHECK_FALSE(tok->bos_id().has_value());
    CHECK_FALSE(tok->eos_id().has_value());
    CHECK(tok->encode_for_training("x", true, true) == ids({4, 1}));
  }
}

TEST_CASE("vocab.json + merges.txt is a byte-level BPE, vocab.txt alone a WordLevel",
          "[tokenizer]") {
  const std::string dir = temp_dir("tok_vocab");
  // "Ġ" is the ByteLevel character of the space byte.
  write_text(dir + "/vocab.json", Json{{"h", 0},
                                       {"e", 1},
                                       {"l", 2},
                                       {"o", 3},
                                       {"\xC4\xA0", 4},
                                       {"he", 5},
                                       {"ll", 6},
                                       {"hell", 7},
                                       {"hello", 8},
                                       {"\xC4\xA0h", 9}}
                                      .dump());
  write_text(dir + "/merges.txt", "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\n\xC4\xA0 h\n");
  const auto tok = load_tokenizer(dir);
  CHECK_THAT(tok->describe(), Catch::Contains("vocab.json+merges.txt (BPE)"));
  CHECK(tok->encode("hello") == ids({8}));
  // " hello": "Ġ h" is the last merge, so h-e, l-l, he-ll, hell-o win and Ġ stays alone.
  CHECK(tok->encode("hello hello") == ids({8, 4, 8}));
  CHECK(tok->decode(tok->encode("hello hello")) == "hello hello");

  const std::string dir2 = temp_dir("tok_vocabtxt");
  write_text(dir2 + "/vocab.txt", "[UNK]\n  hello \n\nworld\n");
  const auto words = load_tokenizer(dir2);
  CHECK(words->vocab_size() == 3);
  CHECK(words->encode("world") == ids({3}));        // id = line number
  CHECK(words->encode("hello world") == ids({0}));  // no pre-tokenizer: the text is one word
  const std::string dir3 = temp_dir("tok_vocabtxt_nounk");
  write_text(dir3 + "/vocab.txt", "hello\n");
  CHECK_THAT(load_error(dir3).message(), Catch::Contains("[UNK]"));
}

TEST_CASE("Invalid UTF-8 becomes U+FFFD per maximal subpart before tokenizing", "[tokenizer]") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(repair_utf8("a\x80z") == "a" + r + "z");
  CHECK(repair_utf8("\xC0\xAF") == r + r);                  // overlong: two bytes, two U+FFFD
  CHECK(repair_utf8("\xED\xA0\x80") == r + r + r);          // a surrogate
  CHECK(repair_utf8("\xF0\x9F\x98x") == r + "x");           // truncated: one U+FFFD
  CHECK(repair_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // past U+10FFFF
  CHECK(repair_utf8("\xE2\x82") == r);                      // cut at the end
  CHECK(repair_utf8("ok \xF0\x9F\x98\x80") == "ok \xF0\x9F\x98\x80");
  CHECK(is_valid_utf8("plain ascii text, long enough for the fast path"));
  CHECK_FALSE(is_valid_utf8("plain ascii text, long enough\xFF"));
  const Json added = {added_token(6, r, false, false)};
  const auto tok = load_tokenizer(folder_with("tok_utf8", word_level(added)));
  CHECK(tok->encode("x\xFFy") == ids({1, 6, 2}));
}

TEST_CASE("A Llama 3 rank file gets Meta's 256 special tokens, their text stays text",
          "[tokenizer]") {
  const std::string dir = temp_dir("tok_rank");
  std::filesystem::create_directory(dir + "/original");
  std::string ranks;
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b) {
    ranks += fmt::format("{}{}{}== {}\n", b64[b >> 2], b64[(b & 3) << 4], "", b);
  }
  ranks += "aGk= 256\n";  // "hi"
  write_text(dir + "/original/tokenizer.model", ranks);
  const auto tok = load_tokenizer(dir);
  CHECK(tok->vocab_size() == 257 + 256);
  CHECK(tok->bos_id() == 257);
  CHECK(tok->eos_id() == 258);
  CHECK(tok->encode("hi") == ids({256}));
  CHECK(tok->encode("<|eot_id|>").size() > 1);  // plain text, as Meta's encode does
  CHECK(tok->encode_for_training("hi", true, true) == ids({257, 256, 258}));
  CHECK(tok->decode({257, 256}) == "<|begin_of_text|>hi");

  write_text(dir + "/original/tokenizer.model", ranks + "not a rank line\n");
  const ConfigError e = load_error(dir);
  CHECK(e.where() == dir + "/original/tokenizer.model:258");
}

TEST_CASE("encode is thread-safe: threads get the ids one thread gets", "[tokenizer]") {
  const Json added = {added_token(6, "<|eot|>", true, false)};
  Json t = word_level(added);
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", "\\s+|\\p{L}+"}}},
                           {"behavior", "Removed"},
                           {"invert", false}},
                          {{"type", "Digits"}, {"individual_digits", true}}}}};
  const auto tok = load_tokenizer(folder_with("tok_threads", t));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += fmt::format("x{} y <|eot|>lord{} ", i, i * 7);
  const std::vector<int32_t> want = tok->encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = tok->encode(text); });
  for (auto& th : threads) th.join();
  for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("A folder without a tokenizer file, or no folder, is a ConfigError", "[tokenizer]") {
  const std::string dir = temp_dir("tok_empty");
  write_text(dir + "/config.json", "{}");
  const ConfigError e = load_error(dir);
  CHECK(e.where() == "model.hf_assets_path");
  CHECK_THAT(e.message(), Catch::Contains("config.json"));
  CHECK_THAT(load_error(dir + "/missing").message(), Catch::Contains("No such file"));
}

// titan's tokenizer against the references, on the whole generated corpus (test/oracles: about
// 3 MB with every hard case, see make_corpus.js): Hugging Face tokenizers for tokenizer.json (ours,
// and Qwen3's real file) and torchtitan's vocab-file fallback, tiktoken for a rank file. The
// oracle data is built once per build folder by test/oracles/run_oracles.sh (node and the npm
// packages of test/oracles); without them the tests are skipped and say why.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "catch_torch.h"
#include "tokenizer/tiktoken_file.h"
#include "tokenizer/tokenizer_loader.h"
#include "util/files.h"

using namespace titan;

namespace {

// The oracle folder, built on first use; empty with `why` set when it cannot be built.
std::string oracle_dir(std::string& why) {
  static std::once_flag once;
  static std::string dir, reason;
  std::call_once(once, [] {
    const std::string out = std::string(TITAN_BINARY_DIR) + "/tokenizer_oracles";
    const std::string command = fmt::format("{}/test/oracles/run_oracles.sh '{}' > '{}.log' 2>&1",
                                            TITAN_SOURCE_DIR, out, out);
    const int status = std::system(command.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 0) {
      dir = out;
    } else if (code == 77) {
      reason =
          "SKIPPED: node or the npm oracles are missing (scripts/install_deps.sh --tests "
          "installs them); see " +
          out + ".log";
    } else {
      reason = fmt::format("FAILED: run_oracles.sh exited {}; see {}.log", code, out);
    }
  });
  why = reason;
  return dir;
}

std::vector<uint32_t> read_ids(const std::string& path) {
  const std::string bytes = read_file(path, uint64_t(1) << 32);
  std::vector<uint32_t> ids(bytes.size() / 4);
  std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  return ids;
}

std::string shown(const Tokenizer& tok, int32_t id) {
  try {
    return tok.decode({id});
  } catch (const std::exception&) {
    return "?";  // a decoder titan does not implement
  }
}

// Requires tok's ids of the corpus to equal the oracle's; on a difference, names the first one
// with the tokens around it.
void require_same_ids(const Tokenizer& tok, const std::string& dir, const std::string& ids_file) {
  const std::string corpus = read_file(dir + "/corpus.txt", uint64_t(1) << 32);
  REQUIRE(corpus.size() > 1000000);
  const std::vector<uint32_t> want = read_ids(dir + "/" + ids_file);
  const std::vector<int32_t> got = tok.encode(corpus);
  size_t i = 0;
  while (i < want.size() && i < got.size() && uint32_t(got[i]) == want[i]) ++i;
  if (i < want.size() || i < got.size()) {
    std::string context;
    for (size_t k = i >= 3 ? i - 3 : 0; k < i + 4 && k < want.size() && k < got.size(); ++k) {
      context += fmt::format("\n  #{}: reference {} {:?} titan {} {:?}", k, want[k],
                             shown(tok, int32_t(want[k])), got[k], shown(tok, got[k]));
    }
    FAIL(fmt::format("{} ids ({} by the reference, {} by titan) differ first at token {}:{}",
                     ids_file, want.size(), got.size(), i, context));
  }
  SUCCEED(fmt::format("{} tokens equal", want.size()));
}

// What torchtitan infers (vocabulary size, BOS/EOS ids, what encode("") adds) equals the oracle's.
void require_same_info(const Tokenizer& tok, const std::string& json_file) {
  const nlohmann::json info = nlohmann::json::parse(read_file(json_file, 1 << 20));
  CHECK(tok.vocab_size() == info["vocab_size"].get<int64_t>());
  const std::vector<int32_t> empty = tok.encode_with_special_tokens("");
  CHECK(empty == info["empty_with_special"].get<std::vector<int32_t>>());
  for (const auto& [key, id] : {std::pair{"bos_id", tok.bos_id()}, {"eos_id", tok.eos_id()}}) {
    INFO(key);
    if (info[key].is_null()) {
      CHECK_FALSE(id.has_value());
    } else {
      REQUIRE(id.has_value());
      CHECK(*id == info[key].get<int32_t>());
    }
  }
}

// The folder's tokenizer against the oracle's ids and torchtitan's inference; then `more`.
void check_folder(const std::string& variant,
                  const std::function<void(const Tokenizer&)>& more = nullptr) {
  std::string why;
  const std::string dir = oracle_dir(why);
  if (dir.empty()) {
    if (why.rfind("SKIPPED", 0) == 0) TITAN_SKIP(why);
    FAIL(why);
  }
  const auto tok = load_tokenizer(dir + "/" + variant);
  INFO(tok->describe());
  require_same_ids(*tok, dir, variant + ".ids");
  require_same_info(*tok, dir + "/" + variant + ".ids.json");
  if (more) more(*tok);
}

}  // namespace

TEST_CASE("Llama 3 tokenizer.json gives Hugging Face tokenizers' ids on the whole corpus",
          "[tokenizer][oracle]") {
  check_folder("llama3");
}

TEST_CASE(
    "A GPT-2-style tokenizer.json (ByteLevel with prefix space and regex, merges applied, "
    "single_word/lstrip/rstrip added tokens) gives HF's ids on the whole corpus",
    "[tokenizer][oracle]") {
  check_folder("gpt2style");
}

TEST_CASE(
    "A SentencePiece-style tokenizer.json (Prepend/Replace normalizer, byte_fallback, fused "
    "unk, template) gives HF's ids on the whole corpus",
    "[tokenizer][oracle]") {
  check_folder("spm");
}

TEST_CASE(
    "A tokenizer.json with Strip/Replace-regex normalizers, Split/Digits/Metaspace, unk and "
    "torchtitan-added config tokens gives HF's ids on the whole corpus",
    "[tokenizer][oracle]") {
  check_folder("mix");
}

TEST_CASE(
    "Qwen3's own tokenizer.json (NFC normalizer, case-insensitive Split regex and ByteLevel, "
    "151643 ids and 26 added tokens) gives HF's ids on the whole corpus, and torchtitan's "
    "vocabulary size, no BOS and <|im_end|> as EOS",
    "[tokenizer][oracle]") {
  // The ids, and vocabulary size, BOS and EOS as torchtitan infers them (encode.js); then the
  // values themselves, so that an oracle gone wrong shows too.
  check_folder("qwen3", [](const Tokenizer& tok) {
    CHECK(tok.vocab_size() == 151669);
    CHECK_FALSE(tok.bos_id().has_value());
    REQUIRE(tok.eos_id().has_value());
    CHECK(*tok.eos_id() == 151645);
    CHECK(tok.decode({*tok.eos_id()}) == "<|im_end|>");
  });
}

TEST_CASE(
    "vocab.json + merges.txt, built as torchtitan builds it, gives HF's ids on the whole "
    "corpus",
    "[tokenizer][oracle]") {
  check_folder("vocabfiles");
}

TEST_CASE("A tiktoken rank file (cl100k_base) gives tiktoken's ids on the whole corpus",
          "[tokenizer][oracle]") {
  std::string why;
  const std::string dir = oracle_dir(why);
  if (dir.empty()) {
    if (why.rfind("SKIPPED", 0) == 0) TITAN_SKIP(why);
    FAIL(why);
  }
  const auto tok = load_tiktoken_file(dir + "/cl100k_base.tiktoken", false);
  CHECK(tok->vocab_size() == 100256);
  require_same_ids(*tok, dir, "cl100k.ids");
}

TEST_CASE(
    "Meta's Llama 3 rank file (original/tokenizer.model) gives tiktoken's ids on the whole "
    "corpus, with Llama 3's special tokens from 128000",
    "[tokenizer][oracle]") {
  std::string why;
  const std::string dir = oracle_dir(why);
  if (dir.empty()) {
    if (why.rfind("SKIPPED", 0) == 0) TITAN_SKIP(why);
    FAIL(why);
  }
  const auto tok = load_tokenizer(dir + "/llama3_rank");
  CHECK(tok->vocab_size() == 128256);
  CHECK(tok->bos_id() == 128000);
  CHECK(tok->eos_id() == 128001);
  require_same_ids(*tok, dir, "llama3_rank.ids");
}

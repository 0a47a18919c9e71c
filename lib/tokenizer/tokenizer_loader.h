// The tokenizer of model.hf_assets_path, read as torchtitan v0.2.2 reads it
// (torchtitan/components/tokenizer.py, HuggingFaceTokenizer), with ids equal to Hugging Face
// tokenizers' (tokenizer.json, vocab files) or tiktoken's (a Llama 3 rank file).
//
// Which file (torchtitan's order; the first that exists wins):
//   1. tokenizer.json: the whole pipeline is read from it.
//   2. vocab.json or vocab.txt (vocab.json first), with merges.txt: a byte-level BPE built as
//      torchtitan builds it (ByteLevel pre-tokenizer without prefix space, GPT-2's regex; merges
//      are the non-empty lines not starting with '#', their first two space-separated fields).
//      Without merges.txt: a WordLevel model with unknown token "[UNK]" and no pre-tokenizer (a
//      whole text is one word). vocab.txt: one token per line, id = line number, stripped, empty
//      lines skipped.
//   3. (titan's addition: torchtitan v0.2.2 reads no rank file) original/tokenizer.model or
//      tokenizer.model when it is Meta's Llama 3 tiktoken rank file: the cl100k/Llama 3
//      pre-tokenizer regex, the 256 special tokens of Meta's llama3 tokenizer.py from id 128000
//      (<|begin_of_text|>, <|end_of_text|>, <|reserved_special_token_0..4|>, <|start_header_id|>,
//      <|end_header_id|>, <|eot_id|>, <|reserved_special_token_5..250|>). As in Meta's
//      Tokenizer.encode (allowed_special empty, nothing disallowed), a special token's text in the
//      input is plain text. Meta's wrapper also cuts inputs into 400,000-character chunks and
//      25,000-character runs of (non-)whitespace; titan, like tiktoken itself, does not.
//
// Special tokens and BOS/EOS (torchtitan's _infer_special_tokens and _infer_should_add_bos_eos),
// from tokenizer_config.json when the folder has one:
//   - bos_token, eos_token, pad_token, unk_token, sep_token, cls_token, mask_token (a string, or
//     an object's "content"), then every added_tokens_decoder entry with a "content", are added
//     to the tokenizer as special tokens (HF's add_special_tokens: a token already known keeps its
//     id, its flags are replaced; flags from an object default to single_word/lstrip/rstrip false,
//     normalized true; a plain string is a special, non-normalized token). This can change
//     tokenization, as it does in torchtitan.
//   - bos_id/eos_id: the id of the token equal to bos_token/eos_token (when both are the same
//     string only bos is set, as in torchtitan's elif).
//   - hf_adds_bos/eos: whether HF's encode("") with the post-processor holds bos_id/eos_id.
//   - default_add_bos/eos: add_bos_token/add_eos_token when present (Python truthiness), else
//     false.
//
// Components of tokenizer.json titan implements: models BPE (merges, ignore_merges, byte_fallback,
// unk_token, fuse_unk, continuing_subword_prefix, end_of_word_suffix; dropout only null or 0) and
// WordLevel; normalizers Sequence, Prepend, Replace, Strip, ByteLevel; pre-tokenizers Sequence,
// Split, ByteLevel, Digits, Whitespace, WhitespaceSplit, CharDelimiterSplit, Metaspace;
// post-processors TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence;
// decoders (decode only) ByteLevel or none. Anything else, and a non-null truncation or padding
// (they change HF's ids), is a ConfigError (exit 2) naming the component and the file.
//
// Text: invalid UTF-8 is replaced by U+FFFD per maximal subpart before tokenizing (see utf8.h):
// HF's core only takes valid strings, and a Python pipeline decodes bytes that way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace titan {

struct TokenizerInfo {
  // "tokenizer.json", "vocab.json+merges.txt (BPE)", "vocab.txt (WordLevel)", "tiktoken ...".
  std::string kind;
  std::string file;         // the file it was read from (the vocabulary, with merges_file)
  std::string merges_file;  // vocab.json + merges.txt: the merges, read beside `file`
  int64_t vocab_size = 0;   // HF's get_vocab_size(): distinct tokens, added ones included
  std::optional<int32_t> bos_id, eos_id;
  std::string bos_token, eos_token;
  bool hf_adds_bos = false, hf_adds_eos = false;          // the post-processor adds them
  bool default_add_bos = false, default_add_eos = false;  // tokenizer_config.json's add_*_token
  // The largest id the tokenizer can emit (its vocabulary, added tokens, the post-processor's
  // special tokens, a rank file's ranks), which may exceed vocab_size where ids have gaps, and
  // what gives it, e.g. "added token \"<x>\"" (for the message of a model too small for it).
  int32_t largest_id = -1;
  std::string largest_id_source;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text` without BOS/EOS or any post-processing: HF's
  // encode(text, add_special_tokens=false).ids, or tiktoken's encode_ordinary. Thread-safe.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // HF's encode(text).ids: the post-processor's special tokens included (the raw encoding for a
  // rank file).
  virtual std::vector<int32_t> encode_with_special_tokens(std::string_view text) const = 0;
  // torchtitan's HuggingFaceTokenizer.encode(text, add_bos=, add_eos=): encode_with_special_tokens,
  // then bos_id in front when add_bos and the post-processor did not add it, eos_id at the end
  // likewise.
  std::vector<int32_t> encode_for_training(std::string_view text, bool add_bos, bool add_eos) const;
  // The text of `ids` (special tokens included). Throws RuntimeFailure for a decoder titan does
  // not implement.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

  const TokenizerInfo& info() const { return info_; }
  int64_t vocab_size() const { return info_.vocab_size; }
  std::optional<int32_t> bos_id() const { return info_.bos_id; }
  std::optional<int32_t> eos_id() const { return info_.eos_id; }
  int32_t largest_id() const { return info_.largest_id; }
  // One line for the start-up log: kind, file, vocabulary size, BOS/EOS.
  std::string describe() const;

 protected:
  TokenizerInfo info_;
};

// The tokenizer of the folder `assets_path` (model.hf_assets_path). Throws ConfigError naming the
// file (and the JSON path or line) for a missing folder, no tokenizer file, a file that is not a
// regular file or is too large, malformed content, or a component titan does not implement.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& assets_path);

// Size bounds of the files read.
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t(256) << 20;  // tokenizer.json, vocab, merges
constexpr int kMaxTokenizerJsonDepth = 64;

}  // namespace titan

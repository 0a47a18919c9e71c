// Token sources: the datasets behind the loader, each a list of token documents.
//
//   synthetic  infinite documents generated from the seed (SyntheticText), BOS/EOS added
//   text       .txt file or folder of them; each paragraph (blank-line separated) is a document
//   jsonl      one JSON object per line with a "text" field
//   c4, c4_test, c4_validation
//              torchtitan's datasets from a local copy in the c4 layout (data/c4_source.h)
//   tokens     pre-tokenized .bin shards, uint16 or uint32 little-endian, raw or with an llm.c
//              header; the concatenated stream is cut into window-sized documents
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "util/json_cursor.h"

namespace titan {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Number of documents; 0 means infinite.
  virtual uint64_t num_documents() const = 0;
  // Tokens of document `index` (index < num_documents() when finite). Never empty.
  virtual std::vector<int32_t> document(uint64_t index) const = 0;
  // One line for the start-of-run log.
  virtual std::string describe() const = 0;
};

// A document's text as tokens, with the BOS and EOS its tokenizer adds to every document.
class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  virtual std::vector<int32_t> encode_document(const std::string& text) const = 0;
  virtual int64_t vocab_size() const = 0;    // one more than the largest id it emits
  virtual std::string describe() const = 0;  // for the start-up log
};

// Byte values as ids, BOS 256, EOS 257 (tokenizer/byte_tokenizer.h).
std::shared_ptr<const TextEncoder> byte_encoder();

// What a source reads: training.dataset's keys, or validation's.
struct DatasetSpec {
  DatasetKind kind = DatasetKind::kSynthetic;
  std::string path;
  TokenDtype token_dtype = TokenDtype::kUint16;
  std::string section = "training";  // names the keys in errors: "<section>.dataset_path"
};
DatasetSpec training_dataset(const TrainingConfig& training);
DatasetSpec validation_dataset(const ValidationConfig& validation, TokenDtype token_dtype);

// Builds the source `spec` names. `window` is seq_len + 1 (the tokens source cuts its stream
// into documents of that length). Text datasets are encoded by `encoder` (data/text_encoding.h;
// null: byte_encoder()). Throws ConfigError (exit 2) for a missing path, an unreadable or
// malformed file, an encoder whose vocabulary exceeds vocab_size, or a token id >= vocab_size,
// naming the file (and line for jsonl and c4).
std::unique_ptr<TokenSource> make_token_source(const DatasetSpec& spec, uint64_t seed,
                                               int64_t window, int64_t vocab_size,
                                               std::shared_ptr<const TextEncoder> encoder = {});

// The "text" field of one JSON object (strict JSON: escapes, numbers and literals are checked;
// nesting depth is limited only by the line's length). Throws JsonSyntaxError, nothing else
// (but std::bad_alloc).
std::string json_text_field(const std::string& line);

}  // namespace titan

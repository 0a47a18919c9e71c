// Token sources: the datasets behind the loader, each a list of token documents.
//
//   synthetic  infinite documents generated from the seed (SyntheticText), BOS/EOS added
//   text       .txt file or folder of them; each paragraph (blank-line separated) is a document
//   jsonl      one JSON object per line with a "text" field (the c4 layout)
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

// Builds the source the config names. `window` is seq_len + 1 (the tokens source cuts its
// stream into documents of that length). Requires vocab_size > every token id it can emit.
// Throws ConfigError (exit 2) for a missing path, an unreadable or malformed file, or a token
// id >= vocab_size, naming the file (and line for jsonl).
std::unique_ptr<TokenSource> make_token_source(const TrainingConfig& training, uint64_t seed,
                                               int64_t window, int64_t vocab_size);

// The "text" field of one JSON object (strict JSON: escapes, numbers and literals are checked;
// nesting depth is limited only by the line's length). Throws JsonSyntaxError, nothing else
// (but std::bad_alloc).
std::string json_text_field(const std::string& line);

}  // namespace titan

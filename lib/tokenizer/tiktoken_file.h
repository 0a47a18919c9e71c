// Meta's Llama 3 tokenizer.model: a tiktoken rank file (one "<base64 token> <rank>" per line),
// encoded as OpenAI's tiktoken encodes (encode_ordinary) with the Llama 3 / cl100k pattern, plus
// the 256 special tokens of Meta's llama3 tokenizer.py from id = number of ranks.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer_loader.h"

namespace titan {

// Llama 3's (and cl100k_base's) pre-tokenizer pattern.
extern const char* const kLlama3Pattern;

// The tokenizer of the rank file `path`. `with_llama3_specials`: add Meta's 256 special tokens
// (BOS <|begin_of_text|>, EOS <|end_of_text|>); without them (a cl100k_base rank file in tests)
// there are none. Throws ConfigError naming the file and line.
std::unique_ptr<Tokenizer> load_tiktoken_file(const std::string& path, bool with_llama3_specials);

}  // namespace titan

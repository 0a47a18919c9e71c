// How text datasets become tokens: model.hf_assets_path's tokenizer (tokenizer/tokenizer_loader.h),
// each document encoded with the BOS and EOS it adds, as torchtitan's text datasets do; or bytes
// (256 byte values, BOS 256, EOS 257) when there is no tokenizer to read.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/sources.h"
#include "tokenizer/tokenizer_loader.h"

namespace titan {

struct TextEncoding {
  std::shared_ptr<const TextEncoder> encoder;  // byte_encoder() without a tokenizer
  std::shared_ptr<const Tokenizer> tokenizer;  // null without one
  // fingerprint.log's "tokenizer" line: the file read and tokenizer_config.json, each with a hash
  // of its bytes, and the vocabulary size; empty bytewise
  // (so that a bytewise run's header is what it was before tokenizers).
  std::string fingerprint;
  std::vector<std::string> notes;  // for the start-up log
};

// The encoder for `config`'s text datasets (training.dataset and, with validation.enable,
// validation.dataset of kinds text, jsonl, c4*; synthetic and tokens read no text):
//   - no text dataset, or model.hf_assets_path empty: bytes;
//   - hf_assets_path at torchtitan's default ("./tests/assets/tokenizer") and absent: bytes,
//     with a note saying so;
//   - otherwise the tokenizer there (load_tokenizer: exit 2 naming the folder and the files
//     looked for when it holds none, or a path that does not exist).
// A tokenizer whose vocabulary does not fit the flavor (vocab_size > model's), or that can emit
// an id at or past the model's vocab_size (Tokenizer::largest_id), is a ConfigError naming both;
// so is the byte tokenizer's 258 on a smaller flavor. Reads only the
// tokenizer's files; writes nothing.
TextEncoding text_encoding_for(const Config& config, int64_t model_vocab_size);

// An encoder over `tokenizer`: tokenizer->encode_for_training(text, true, true). With
// id_limit > 0 an id >= id_limit is a ConfigError naming both (the model's vocab_size).
std::shared_ptr<const TextEncoder> tokenizer_encoder(std::shared_ptr<const Tokenizer> tokenizer,
                                                     int64_t id_limit);

}  // namespace titan

// A Hugging Face tokenizer pipeline (tokenizer.json or torchtitan's vocab-file fallbacks) behind
// the Tokenizer interface.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/pipeline_stages.h"
#include "tokenizer/tokenizer_loader.h"

namespace titan {

struct HfPipeline {
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<TokenModel> model;
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  AddedVocabulary added;
  std::string decoder;  // "ByteLevel", "" for none; another type: decode() refuses
};

class HfTokenizer : public Tokenizer {
 public:
  // `info` gets its vocab_size from the pipeline.
  HfTokenizer(HfPipeline pipeline, TokenizerInfo info);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;

  // For the loader (torchtitan's special-token inference).
  void add_special_tokens(const std::vector<AddedToken>& tokens);
  int32_t token_to_id(std::string_view token) const;
  TokenizerInfo& mutable_info() { return info_; }

 private:
  // vocab_size (HF's), and the largest id any stage can emit.
  void count_vocabulary();
  void encode_valid(std::string_view text, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

  HfPipeline p_;
  mutable std::once_flag tokens_once_;
  mutable std::vector<std::string> tokens_;  // id -> token, for decode
};

}  // namespace titan

#include "tokenizer/hf_tokenizer.h"

#include <fmt/format.h>

#include <unordered_map>

#include "tokenizer/bpe.h"
#include "util/error.h"
#include "util/utf8.h"

namespace titan {

HfTokenizer::HfTokenizer(HfPipeline pipeline, TokenizerInfo info) : p_(std::move(pipeline)) {
  info_ = std::move(info);
  // Raw-byte pieces for the model when a ByteLevel pre-tokenizer is the last stage.
  if (p_.pre_tokenizer) {
    p_.model->enable_byte_level_input();
    p_.pre_tokenizer->set_last();
  }
  count_vocabulary();
}

void HfTokenizer::add_special_tokens(const std::vector<AddedToken>& tokens) {
  p_.added.add_tokens(tokens, *p_.model, p_.normalizer.get());
  count_vocabulary();
}

void HfTokenizer::count_vocabulary() {
  info_.vocab_size =
      static_cast<int64_t>(p_.model->vocab_size() + p_.added.count_outside(*p_.model));
  int32_t largest = -1;
  std::string source;
  p_.model->for_each_token([&](std::string_view token, int32_t id) {
    if (id > largest) largest = id, source = fmt::format("vocabulary token {:?}", token);
  });
  if (!p_.added.empty() && p_.added.by_id().rbegin()->first > largest) {
    const auto& [id, token] = *p_.added.by_id().rbegin();
    largest = id;
    source = fmt::format("added token {:?}", token.content);
  }
  if (p_.post_processor && p_.post_processor->largest_added_id() > largest) {
    largest = p_.post_processor->largest_added_id();
    source = "a special token of the post-processor";
  }
  info_.largest_id = largest;
  info_.largest_id_source = source;
}

int32_t HfTokenizer::token_to_id(std::string_view token) const {
  return p_.added.token_to_id(token, *p_.model);
}

void HfTokenizer::encode_segment(std::string_view text, bool at_start,
                                 std::vector<int32_t>& out) const {
  if (!p_.pre_tokenizer) {
    p_.model->encode(text, false, out);
    return;
  }
  p_.pre_tokenizer->split(text, at_start, [&](std::string_view piece, bool byte_level, bool) {
    p_.model->encode(piece, byte_level, out);
  });
}

// HF's extract_and_normalize, pre-tokenization and model, on well-formed UTF-8.
void HfTokenizer::encode_valid(std::string_view text, std::vector<int32_t>& out) const {
  auto push = [&](int32_t id) { out.push_back(id); };
  p_.added.split(
      text, false,
      [&](std::string_view segment, size_t offset) {
        if (!p_.normalizer) {
          p_.added.split(
              segment, true,
              [&](std::string_view piece, size_t inner) {
                encode_segment(piece, offset == 0 && inner == 0, out);
              },
              push);
          return;
        }
        std::string normalized(segment);
        p_.normalizer->normalize(normalized);
        p_.added.split(
            normalized, true,
            [&](std::string_view piece, size_t inner) {
              encode_segment(piece, offset == 0 && inner == 0, out);
            },
            push);
      },
      push);
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (is_valid_utf8(text)) {
    encode_valid(text, out);
  } else {
    encode_valid(repair_utf8(text), out);
  }
  return out;
}

std::vector<int32_t> HfTokenizer::encode_with_special_tokens(std::string_view text) const {
  std::vector<int32_t> ids = encode(text);
  return p_.post_processor ? p_.post_processor->process(std::move(ids)) : ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  if (!p_.decoder.empty() && p_.decoder != "ByteLevel") {
    throw RuntimeFailure(
        fmt::format("decoding with the \"{}\" decoder is not implemented", p_.decoder));
  }
  std::call_once(tokens_once_, [&] {
    p_.model->for_each_token([&](std::string_view token, int32_t id) {
      if (id >= static_cast<int32_t>(tokens_.size())) tokens_.resize(id + 1);
      if (tokens_[id].empty()) tokens_[id].assign(token);
    });
  });
  static const std::unordered_map<uint32_t, char> char_byte = [] {
    std::unordered_map<uint32_t, char> m;
    for (int b = 0; b < 256; ++b) m[byte_level_char(static_cast<unsigned char>(b))] = char(b);
    return m;
  }();
  static const std::string kNoToken;
  std::string joined;
  for (size_t k = 0; k < ids.size(); ++k) {
    // HF's id_to_token: the added vocabulary first, then the model.
    const auto added = p_.added.by_id().find(ids[k]);
    const std::string& token = added != p_.added.by_id().end() ? added->second.content
                               : ids[k] >= 0 && size_t(ids[k]) < tokens_.size() ? tokens_[ids[k]]
                                                                                : kNoToken;
    if (p_.decoder.empty()) {  // no decoder: HF joins the tokens with spaces
      if (k > 0) joined += ' ';
      joined += token;
      continue;
    }
    // ByteLevel: a token whose characters all come from the byte table is those bytes.
    std::string bytes;
    size_t i = 0;
    bool all = true;
    while (i < token.size() && all) {
      const auto it = char_byte.find(next_code_point(token, i));
      all = it != char_byte.end();
      if (all) bytes += it->second;
    }
    joined += all ? bytes : token;
  }
  return p_.decoder.empty() ? joined : repair_utf8(joined);
}

}  // namespace titan

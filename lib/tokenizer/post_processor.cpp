#include "tokenizer/post_processor.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "tokenizer/json_spec.h"
#include "util/error.h"

namespace titan {
namespace {

// One item of a template: the sequence ($A), or a special token's ids.
struct TemplateItem {
  bool sequence = false;
  std::vector<int32_t> ids;
};

class TemplatePostProcessor : public PostProcessor {
 public:
  explicit TemplatePostProcessor(std::vector<TemplateItem> items) : items_(std::move(items)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const TemplateItem& item : items_) {
      if (item.sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    return out;
  }
  int32_t largest_added_id() const override {
    int32_t largest = -1;
    for (const TemplateItem& item : items_) {
      for (const int32_t id : item.ids) largest = std::max(largest, id);
    }
    return largest;
  }

 private:
  std::vector<TemplateItem> items_;
};

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    for (const auto& p : parts_) ids = p->process(std::move(ids));
    return ids;
  }
  int32_t largest_added_id() const override {
    int32_t largest = -1;
    for (const auto& p : parts_) largest = std::max(largest, p->largest_added_id());
    return largest;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

class IdentityPostProcessor : public PostProcessor {
 public:
  std::vector<int32_t> process(std::vector<int32_t> ids) const override { return ids; }
};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw ConfigError(where, what, "check the tokenizer file's post_processor");
}

// The ids a special token of the template stands for ("special_tokens" of the processor).
std::vector<int32_t> special_ids(const Json& specials, const std::string& name,
                                 const std::string& where) {
  const Json& entry = json_member(specials, name);
  const Json& ids = json_member(entry, "ids");
  if (!ids.is_array()) {
    bad(where,
        fmt::format("the template names \"{}\", which special_tokens does not define", name));
  }
  std::vector<int32_t> out;
  for (const Json& id : ids) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > 0x7FFFFFFF) {
      bad(where, fmt::format("special token \"{}\": ids must be non-negative integers", name));
    }
    out.push_back(static_cast<int32_t>(id.get<uint64_t>()));
  }
  return out;
}

std::unique_ptr<PostProcessor> make_template(const Json& spec, const std::string& where) {
  const Json& single = json_member(spec, "single");
  const Json& specials = json_member(spec, "special_tokens");
  const std::string swhere = json_where(where, "single");
  std::vector<Json> pieces;
  if (single.is_string()) {  // "<s> $A </s>"
    const std::string text = single.get<std::string>();
    size_t i = 0;
    while (i < text.size()) {
      const size_t j = text.find(' ', i);
      const std::string word = text.substr(i, j == std::string::npos ? j : j - i);
      if (!word.empty()) pieces.push_back(word);
      if (j == std::string::npos) break;
      i = j + 1;
    }
  } else if (single.is_array()) {
    for (const Json& p : single) pieces.push_back(p);
  } else {
    bad(swhere, "expected the template as a list or a string");
  }
  std::vector<TemplateItem> items;
  for (const Json& p : pieces) {
    TemplateItem item;
    if (p.is_string()) {
      std::string word = p.get<std::string>();
      const size_t colon = word.rfind(':');
      if (colon != std::string::npos && colon > 0) word = word.substr(0, colon);  // ":type_id"
      if (!word.empty() && word[0] == '$') {
        if (word == "$" || word == "$A" || word == "$a" || word == "$0") {
          item.sequence = true;
        } else {
          bad(swhere, fmt::format("\"{}\": only the first sequence ($A) is used by titan", word));
        }
      } else {
        item.ids = special_ids(specials, word, json_where(where, "special_tokens"));
      }
    } else if (p.is_object() && p.contains("Sequence")) {
      const std::string id = json_string(p["Sequence"], "id", swhere);
      if (id != "A") bad(swhere, fmt::format("sequence \"{}\" in the single template", id));
      item.sequence = true;
    } else if (p.is_object() && p.contains("SpecialToken")) {
      item.ids = special_ids(specials, json_string(p["SpecialToken"], "id", swhere),
                             json_where(where, "special_tokens"));
    } else {
      bad(swhere, "a template item is neither a Sequence nor a SpecialToken");
    }
    items.push_back(std::move(item));
  }
  return std::make_unique<TemplatePostProcessor>(std::move(items));
}

// BertProcessing / RobertaProcessing: [cls] $A [sep], each given as [token, id].
std::unique_ptr<PostProcessor> make_cls_sep(const Json& spec, const std::string& where) {
  auto id_of = [&](const char* key) {
    const Json& v = json_member(spec, key);
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_unsigned()) {
      bad(json_where(where, key), "expected [token, id]");
    }
    return static_cast<int32_t>(v[1].get<uint64_t>());
  };
  TemplateItem cls, seq, sep;
  cls.ids = {id_of("cls")};
  seq.sequence = true;
  sep.ids = {id_of("sep")};
  return std::make_unique<TemplatePostProcessor>(std::vector<TemplateItem>{cls, seq, sep});
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& spec, const std::string& where) {
  const std::string type = json_type(spec, where);
  if (type == "TemplateProcessing") return make_template(spec, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(spec, where);
  if (type == "ByteLevel") return std::make_unique<IdentityPostProcessor>();
  if (type == "Sequence") {
    const Json& list = json_member(spec, "processors");
    if (!list.is_array()) bad(json_where(where, "processors"), "expected a list of processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_post_processor(list[i], fmt::format("{}.processors[{}]", where, i)));
    }
    return std::make_unique<SequencePostProcessor>(std::move(parts));
  }
  unsupported_component("post-processor", type, where);
}

}  // namespace titan

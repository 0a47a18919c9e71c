#include "checkpoint/safetensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "util/error.h"
#include "util/json_cursor.h"
#include "util/strings.h"

namespace titan {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

// Larger headers are not written by any tool; refusing them bounds what a damaged length costs.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;
constexpr uint64_t kMaxDim = uint64_t(1) << 40;

const std::pair<const char*, at::ScalarType> kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

const char* dtype_name(at::ScalarType type) {
  for (const auto& [name, t] : kDtypes) {
    if (t == type) return name;
  }
  throw RuntimeFailure(fmt::format("safetensors has no name for dtype {}", c10::toString(type)));
}

std::string header_json(const std::vector<at::Tensor>& contiguous,
                        const std::vector<NamedTensor>& tensors,
                        const SafetensorsMetadata& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (json.back() != '{') json += ',';
      json += json_quoted(key) + ":" + json_quoted(value);
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = contiguous[i];
    if (json.size() > 1) json += ',';
    json += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                        json_quoted(tensors[i].name), dtype_name(t.scalar_type()),
                        fmt::join(t.sizes(), ","), offset, offset + t.nbytes());
    offset += t.nbytes();
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

using Entry = SafetensorsEntry;

at::ScalarType parse_dtype(JsonCursor& cur) {
  std::string name;
  cur.string(&name);
  for (const auto& [n, t] : kDtypes) {
    if (name == n) return t;
  }
  cur.fail(fmt::format("unsupported dtype \"{}\"", name));
}

std::vector<uint64_t> parse_uint_array(JsonCursor& cur) {
  std::vector<uint64_t> values;
  cur.expect('[');
  if (cur.peek() == ']') {
    cur.expect(']');
    return values;
  }
  while (true) {
    values.push_back(cur.unsigned_integer());
    if (cur.peek() == ']') break;
    cur.expect(',');
  }
  cur.expect(']');
  return values;
}

Entry parse_entry(JsonCursor& cur, std::string name) {
  Entry e;
  e.name = std::move(name);
  bool has_dtype = false, has_shape = false, has_offsets = false;
  cur.object([&](const std::string& key) {
    if (key == "dtype") {
      e.dtype = parse_dtype(cur);
      has_dtype = true;
    } else if (key == "shape") {
      for (uint64_t d : parse_uint_array(cur)) {
        if (d > kMaxDim) cur.fail(fmt::format("dimension {} is too large", d));
        e.shape.push_back(static_cast<int64_t>(d));
      }
      has_shape = true;
    } else if (key == "data_offsets") {
      auto offsets = parse_uint_array(cur);
      if (offsets.size() != 2) cur.fail("data_offsets must hold two integers");
      e.begin = offsets[0];
      e.end = offsets[1];
      has_offsets = true;
    } else {
      cur.skip_value();
    }
  });
  if (!has_dtype || !has_shape || !has_offsets) {
    cur.fail(fmt::format("tensor \"{}\" lacks dtype, shape or data_offsets", e.name));
  }
  return e;
}

std::vector<Entry> parse_header(const std::string& json, SafetensorsMetadata& metadata) {
  std::vector<Entry> entries;
  JsonCursor cur(json);
  cur.object([&](const std::string& name) {
    if (name != "__metadata__") return entries.push_back(parse_entry(cur, name));
    cur.object([&](const std::string& key) {
      if (cur.peek() != '"') cur.fail("__metadata__ values must be strings");
      cur.string(&metadata[key]);
    });
  });
  if (!cur.at_end()) cur.fail("trailing characters after the header object");
  return entries;
}

// Bytes the shape holds in `dtype`, or an error when it overflows.
uint64_t expected_bytes(const Entry& e) {
  uint64_t n = at::elementSize(e.dtype);
  for (int64_t d : e.shape) {
    const auto dim = static_cast<uint64_t>(d);
    if (dim != 0 && n > std::numeric_limits<uint64_t>::max() / dim) return UINT64_MAX;
    n *= dim;
  }
  return n;
}

void check_entries(std::vector<Entry>& entries, uint64_t data_size, const std::string& source) {
  auto fail = [&](const std::string& what) {
    throw RuntimeFailure(fmt::format("{}: {}", source, what),
                         "the file is damaged or not a safetensors file");
  };
  for (const auto& e : entries) {
    if (e.begin > e.end || e.end > data_size) {
      fail(fmt::format("tensor \"{}\": data_offsets [{}, {}] lie outside the {} data bytes", e.name,
                       e.begin, e.end, data_size));
    }
    if (expected_bytes(e) != e.end - e.begin) {
      fail(fmt::format("tensor \"{}\": shape [{}] of {} needs {} bytes, data_offsets give {}",
                       e.name, fmt::join(e.shape, ", "), dtype_name(e.dtype), expected_bytes(e),
                       e.end - e.begin));
    }
  }
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      fail(fmt::format("tensors \"{}\" and \"{}\" overlap", by_offset[i - 1]->name,
                       by_offset[i]->name));
    }
  }
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) fail(fmt::format("tensor \"{}\" appears twice", *dup));
}

}  // namespace

void write_safetensors(HashedFileWriter& out, const std::vector<NamedTensor>& tensors,
                       const SafetensorsMetadata& metadata) {
  std::vector<at::Tensor> contiguous;
  for (const auto& t : tensors) contiguous.push_back(t.tensor.detach().to(at::kCPU).contiguous());
  const std::string json = header_json(contiguous, tensors, metadata);
  uint64_t length = json.size();
  out.write(&length, sizeof length);
  out.write(json.data(), json.size());
  for (const auto& t : contiguous) out.write(t.data_ptr(), t.nbytes());
}

at::Tensor SafetensorsContents::find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return t.tensor;
  }
  return at::Tensor();
}

SafetensorsHeader parse_safetensors_header(const ReadBytes& read, uint64_t file_size,
                                           const std::string& source) {
  const std::string hint = "the file is damaged or not a safetensors file";
  if (file_size < 8) {
    throw RuntimeFailure(
        fmt::format("{}: {} bytes, shorter than the 8-byte header length", source, file_size),
        hint);
  }
  uint64_t length = 0;
  const std::string length_bytes = read(0, sizeof length);
  std::memcpy(&length, length_bytes.data(), sizeof length);
  if (length > file_size - 8 || length > kMaxHeaderBytes) {
    throw RuntimeFailure(
        fmt::format("{}: header length {} exceeds the file's {} bytes", source, length, file_size),
        hint);
  }
  SafetensorsHeader header;
  header.json = read(8, length);
  try {
    header.entries = parse_header(header.json, header.metadata);
  } catch (const JsonSyntaxError& e) {
    throw RuntimeFailure(fmt::format("{}: header JSON, {}", source, e.what()), hint);
  }
  header.data_start = 8 + length;
  check_entries(header.entries, file_size - header.data_start, source);
  return header;
}

SafetensorsContents parse_safetensors(std::string file_bytes, const std::string& source) {
  const auto shared = std::make_shared<const std::string>(std::move(file_bytes));
  const std::string& bytes = *shared;
  const SafetensorsHeader header = parse_safetensors_header(
      [&](uint64_t offset, uint64_t n) { return bytes.substr(offset, n); }, bytes.size(), source);
  SafetensorsContents contents;
  contents.metadata = header.metadata;
  for (const auto& e : header.entries) {
    const auto options = at::TensorOptions().dtype(e.dtype);
    const char* data = bytes.data() + header.data_start + e.begin;
    at::Tensor t;
    if (reinterpret_cast<uintptr_t>(data) % at::elementSize(e.dtype) == 0 && e.end > e.begin) {
      t = at::from_blob(
          const_cast<char*>(data), e.shape, [shared](void*) {}, options);
    } else {
      t = at::empty(e.shape, options);
      if (e.end > e.begin) std::memcpy(t.data_ptr(), data, e.end - e.begin);
    }
    contents.tensors.push_back({e.name, t});
  }
  return contents;
}

}  // namespace titan

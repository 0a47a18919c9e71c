#include "metrics/tfevents.h"

#include <array>
#include <cstring>

namespace titan {
namespace {

constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kCastagnoliReflected : c >> 1;
    table[i] = c;
  }
  return table;
}

// Protobuf wire types.
enum class Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t field, Wire wire) {
  put_varint(out, (uint64_t{field} << 3) | static_cast<uint32_t>(wire));
}

template <class T>
void put_little_endian(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 and aarch64 are little-endian
  out.append(bytes, sizeof(T));
}

void put_double(std::string& out, uint32_t field, double v) {
  put_key(out, field, Wire::kFixed64);
  put_little_endian(out, v);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, Wire::kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_packed_doubles(std::string& out, uint32_t field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) put_little_endian(packed, v);
  put_bytes(out, field, packed);
}

// HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7.
std::string encode_histogram(const Histogram& h) {
  std::string out;
  put_double(out, 1, h.min);
  put_double(out, 2, h.max);
  put_double(out, 3, h.num);
  put_double(out, 4, h.sum);
  put_double(out, 5, h.sum_squares);
  put_packed_doubles(out, 6, h.bucket_limit);
  put_packed_doubles(out, 7, h.bucket);
  return out;
}

// Summary.Value: tag 1, simple_value 2 (float), histo 5.
std::string encode_value(const SummaryValue& v) {
  std::string out;
  put_bytes(out, 1, v.tag);
  if (v.is_histogram) {
    put_bytes(out, 5, encode_histogram(v.histogram));
  } else {
    put_key(out, 2, Wire::kFixed32);
    put_little_endian(out, v.scalar);
  }
  return out;
}

// Event: wall_time 1, step 2, file_version 3, summary 5 (Summary: value 1, repeated).
std::string event_head(double wall_time, int64_t step) {
  std::string out;
  put_double(out, 1, wall_time);
  if (step != 0) {
    put_key(out, 2, Wire::kVarint);
    put_varint(out, static_cast<uint64_t>(step));
  }
  return out;
}

uint64_t read_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t read_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The step field of an Event (0 when absent or unreadable): only what resume needs.
int64_t event_step(const std::string& data) {
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && i < data.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(data[i++]);
      v |= uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80u) == 0) return true;
    }
    return false;
  };
  while (i < data.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) return 0;
    switch (static_cast<Wire>(key & 7)) {
      case Wire::kVarint:
        if (!varint(v)) return 0;
        if ((key >> 3) == 2) return static_cast<int64_t>(v);
        break;
      case Wire::kFixed64:
        if (data.size() - i < 8) return 0;
        i += 8;
        break;
      case Wire::kFixed32:
        if (data.size() - i < 4) return 0;
        i += 4;
        break;
      case Wire::kBytes:
        if (!varint(v) || v > data.size() - i) return 0;
        i += v;
        break;
      default:
        return 0;
    }
  }
  return 0;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = make_crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(const std::string& data) {
  std::string out;
  const uint64_t length = data.size();
  put_little_endian(out, length);
  put_little_endian(out, masked_crc32c(&length, sizeof length));
  out += data;
  put_little_endian(out, masked_crc32c(data.data(), data.size()));
  return out;
}

std::string encode_file_version_event(double wall_time) {
  std::string out = event_head(wall_time, 0);
  put_bytes(out, 3, "brain.Event:2");
  return out;
}

std::string encode_summary_event(double wall_time, int64_t step,
                                 const std::vector<SummaryValue>& values) {
  std::string summary;
  for (const auto& v : values) put_bytes(summary, 1, encode_value(v));
  std::string out = event_head(wall_time, step);
  put_bytes(out, 5, summary);
  return out;
}

EventRecords read_event_records(const std::string& contents) {
  EventRecords out;
  size_t at = 0;
  while (at < contents.size()) {
    const size_t header = sizeof(uint64_t) + sizeof(uint32_t);
    if (contents.size() - at < header) break;
    const uint64_t length = read_u64(contents.data() + at);
    if (read_u32(contents.data() + at + 8) != masked_crc32c(contents.data() + at, 8)) break;
    if (contents.size() - at - header < length + sizeof(uint32_t)) break;
    const std::string data = contents.substr(at + header, length);
    const size_t total = header + length + sizeof(uint32_t);
    if (read_u32(contents.data() + at + header + length) !=
        masked_crc32c(data.data(), data.size())) {
      out.damaged.push_back(at);  // its frame holds: the records after it still can be read
    } else {
      out.records.push_back({event_step(data), contents.substr(at, total)});
    }
    at += total;
  }
  out.end = at;
  out.complete = at == contents.size();
  return out;
}

}  // namespace titan

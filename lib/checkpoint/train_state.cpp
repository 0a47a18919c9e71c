#include "checkpoint/train_state.h"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

#include "util/error.h"

namespace titan {
namespace {

constexpr char kMagic[8] = {'T', 'I', 'T', 'N', 'S', 'T', 'A', 'T'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kVersionWithInstruments = 2;
constexpr uint32_t kVersionWithModelBuffers = 3;
constexpr uint32_t kMaxInstruments = 64;
constexpr uint32_t kMaxModelBuffers = 4096;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the encoding is little-endian");

class Writer {
 public:
  template <class T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  // A CPU uint8 tensor (a generator state), or an undefined one, as a length and its bytes.
  void put_bytes(const at::Tensor& t) {
    if (!t.defined()) return put<int64_t>(-1);
    at::Tensor c = t.contiguous();
    put<int64_t>(c.numel());
    out_.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
  }
  // A float32 CPU tensor as its element count and raw bytes (a 1-D state).
  void put_floats(const at::Tensor& t) {
    at::Tensor c = t.detach().to(at::kCPU, at::kFloat).contiguous();
    put<int64_t>(c.numel());
    out_.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.nbytes()));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  template <class T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  at::Tensor get_bytes() {
    const auto n = get<int64_t>();
    if (n < 0) return at::Tensor();
    if (static_cast<uint64_t>(n) > bytes_.size()) fail("a state length is larger than the file");
    at::Tensor t = at::empty({n}, at::kByte);
    std::memcpy(t.data_ptr(), take(static_cast<size_t>(n)), static_cast<size_t>(n));
    return t;
  }
  at::Tensor get_floats() {
    const auto n = get<int64_t>();
    if (n < 0 || static_cast<uint64_t>(n) > bytes_.size() / sizeof(float))
      fail("a buffer length is larger than the file");
    at::Tensor t = at::empty({n}, at::kFloat);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::memcpy(t.data_ptr(), take(bytes), bytes);
    return t;
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    if (n > bytes_.size()) fail("a string length is larger than the file");
    return std::string(take(static_cast<size_t>(n)), static_cast<size_t>(n));
  }
  void expect_end() {
    if (at_ != bytes_.size())
      fail(fmt::format("{} unexpected bytes at the end", bytes_.size() - at_));
  }
  [[noreturn]] void fail(const std::string& what) {
    throw RuntimeFailure(fmt::format("{}: not a valid train state: {}", source_, what),
                         "the file is damaged; load another checkpoint");
  }

 private:
  const char* take(size_t n) {
    if (bytes_.size() - at_ < n) fail("the file ends early");
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }

  const std::string& bytes_;
  std::string source_;
  size_t at_ = 0;
};

}  // namespace

bool TrainState::operator==(const TrainState& o) const {
  if (model_buffers.size() != o.model_buffers.size()) return false;
  for (const auto& [name, tensor] : model_buffers) {
    auto it = o.model_buffers.find(name);
    if (it == o.model_buffers.end() || !at::equal(tensor, it->second)) return false;
  }
  return step == o.step && tokens_seen == o.tokens_seen && loader == o.loader && rng == o.rng &&
         instruments == o.instruments;
}

std::string encode_train_state(const TrainState& s) {
  Writer w;
  for (char c : kMagic) w.put(c);
  const uint32_t version = !s.model_buffers.empty() ? kVersionWithModelBuffers
                           : !s.instruments.empty() ? kVersionWithInstruments
                                                    : kVersion;
  w.put(version);
  w.put(s.step);
  w.put(s.tokens_seen);
  w.put(s.loader.epoch);
  w.put(s.loader.doc_cursor);
  w.put(s.loader.offset);
  w.put_bytes(s.rng.cpu);
  w.put<uint32_t>(static_cast<uint32_t>(s.rng.cuda.size()));
  for (const auto& state : s.rng.cuda) w.put_bytes(state);
  if (version == kVersion) return w.take();
  w.put<uint32_t>(static_cast<uint32_t>(s.instruments.size()));
  for (const auto& [name, bytes] : s.instruments) {
    w.put_string(name);
    w.put_string(bytes);
  }
  if (version == kVersionWithInstruments) return w.take();
  w.put<uint32_t>(static_cast<uint32_t>(s.model_buffers.size()));
  for (const auto& [name, tensor] : s.model_buffers) {
    w.put_string(name);
    w.put_floats(tensor);
  }
  return w.take();
}

TrainState decode_train_state(const std::string& bytes, const std::string& source) {
  Reader r(bytes, source);
  for (char c : kMagic) {
    if (r.get<char>() != c) r.fail("wrong magic number (expected TITNSTAT)");
  }
  const auto version = r.get<uint32_t>();
  if (version < kVersion || version > kVersionWithModelBuffers) {
    r.fail(fmt::format("format version {} (this titan-train reads versions {} to {})", version,
                       kVersion, kVersionWithModelBuffers));
  }
  TrainState s;
  s.step = r.get<int64_t>();
  s.tokens_seen = r.get<int64_t>();
  s.loader.epoch = r.get<uint64_t>();
  s.loader.doc_cursor = r.get<uint64_t>();
  s.loader.offset = r.get<uint64_t>();
  s.rng.cpu = r.get_bytes();
  const auto devices = r.get<uint32_t>();
  if (devices > 1024) r.fail(fmt::format("{} CUDA generator states", devices));
  for (uint32_t i = 0; i < devices; ++i) s.rng.cuda.push_back(r.get_bytes());
  if (version >= kVersionWithInstruments) {
    const auto count = r.get<uint32_t>();
    if (count > kMaxInstruments) r.fail(fmt::format("{} instrument states", count));
    for (uint32_t i = 0; i < count; ++i) {
      std::string name = r.get_string();
      s.instruments[name] = r.get_string();
    }
  }
  if (version >= kVersionWithModelBuffers) {
    const auto count = r.get<uint32_t>();
    if (count > kMaxModelBuffers) r.fail(fmt::format("{} model buffers", count));
    for (uint32_t i = 0; i < count; ++i) {
      std::string name = r.get_string();
      s.model_buffers[name] = r.get_floats();
    }
  }
  r.expect_end();
  if (s.step < 0 || s.tokens_seen < 0) r.fail("negative step or token count");
  return s;
}

}  // namespace titan

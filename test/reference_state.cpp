#include "reference_state.h"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "util/files.h"

namespace titan::test {
namespace {

constexpr char kMagic[9] = "TITNREF1";
constexpr uint32_t kVersion = 1;

class Reader {
 public:
  Reader(std::string bytes, std::string path) : bytes_(std::move(bytes)), path_(std::move(path)) {}

  template <class T>
  T read() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  std::string read_string(size_t n) { return std::string(take(n), n); }
  const char* take(size_t n) {
    if (pos_ + n > bytes_.size()) fail("truncated at byte " + std::to_string(pos_));
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_ + ": " + what +
                             " (regenerate with scripts/reference/generate.sh)");
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::string bytes_, path_;
  size_t pos_ = 0;
};

at::Tensor read_tensor(Reader& r, at::ScalarType dtype) {
  auto ndim = r.read<uint32_t>();
  std::vector<int64_t> dims;
  for (uint32_t i = 0; i < ndim; ++i) dims.push_back(r.read<int64_t>());
  auto t = at::empty(dims, dtype);
  std::memcpy(t.data_ptr(), r.take(t.nbytes()), t.nbytes());
  return t;
}

std::map<std::string, std::string> parse_config(const std::string& text) {
  std::map<std::string, std::string> config;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) config[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return config;
}

}  // namespace

ReferenceState load_reference_state(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path, kMaxLogFileBytes);
  } catch (const std::system_error& e) {
    throw std::runtime_error(path + ": " + e.code().message() +
                             " (regenerate with scripts/reference/generate.sh)");
  }
  Reader r(bytes, path);
  if (r.read_string(8) != std::string(kMagic, 8)) r.fail("bad magic");
  if (auto v = r.read<uint32_t>(); v != kVersion)
    r.fail("unsupported version " + std::to_string(v));
  ReferenceState state;
  const auto count = r.read<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    std::string name = r.read_string(r.read<uint32_t>());
    auto kind = r.read<uint8_t>();
    if (kind == 2) {
      std::string text = r.read_string(r.read<uint64_t>());
      if (name == "config") state.config = parse_config(text);
    } else if (kind == 0 || kind == 1) {
      state.tensors[name] = read_tensor(r, kind == 0 ? at::kFloat : at::kLong);
      state.order.push_back(name);
    } else {
      r.fail("record " + name + " has unknown kind " + std::to_string(kind));
    }
  }
  if (!r.done()) r.fail("trailing bytes after the last record");
  return state;
}

const at::Tensor& ReferenceState::tensor(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::runtime_error("reference state has no record " + name);
  return it->second;
}

const std::string& ReferenceState::text(const std::string& key) const {
  auto it = config.find(key);
  if (it == config.end()) throw std::runtime_error("reference config has no key " + key);
  return it->second;
}

double ReferenceState::number(const std::string& key) const { return std::stod(text(key)); }

}  // namespace titan::test

#include "analysis/log_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "util/error.h"
#include "util/files.h"

namespace titan {

std::string read_log_file(const std::string& path, const std::string& hint) {
  try {
    return read_file(path, kMaxLogFileBytes);
  } catch (const std::system_error& e) {
    throw ConfigError(path, "cannot read: " + e.code().message(), hint);
  }
}

std::vector<LogLine> split_log_lines(const std::string& text, const std::string& path) {
  std::vector<LogLine> lines;
  size_t start = 0;
  int64_t number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    ++number;
    if (end == std::string::npos) {
      throw_bad_line(path, number, "the file ends inside this line (truncated?)",
                     "compare the complete file; a run that is still writing may be read again "
                     "once it ends");
    }
    lines.push_back({number, text.substr(start, end - start)});
    start = end + 1;
  }
  return lines;
}

void throw_bad_line(const std::string& path, int64_t line, const std::string& message,
                    const std::string& hint) {
  throw ConfigError(fmt::format("{}:{}", path, line), message, hint);
}

double parse_exact_double(const std::string& word, const std::string& what, const std::string& path,
                          int64_t line) {
  const char* begin = word.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (word.empty() || end != begin + word.size()) {
    throw_bad_line(path, line, fmt::format("{}: \"{}\" is not a number", what, word));
  }
  return v;
}

uint64_t parse_hex64(const std::string& word, const std::string& what, const std::string& path,
                     int64_t line) {
  if (word.size() != 16 || word.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw_bad_line(path, line, fmt::format("{}: \"{}\" is not 16 hex digits", what, word));
  }
  return std::strtoull(word.c_str(), nullptr, 16);
}

int64_t parse_integer(const std::string& word, const std::string& what, const std::string& path,
                      int64_t line) {
  const char* begin = word.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  if (word.empty() || end != begin + word.size() || errno == ERANGE) {
    throw_bad_line(path, line, fmt::format("{}: \"{}\" is not an integer", what, word));
  }
  return v;
}

}  // namespace titan

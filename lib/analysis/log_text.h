// Reading the line-oriented logs titan-train writes (fingerprint.log, numerics.log): splitting
// into numbered lines and words, exact number parsing, and errors that name "<path>:<line>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/strings.h"

namespace titan {

struct LogLine {
  int64_t number = 0;  // 1-based
  std::string text;
};

// The whole file. Throws ConfigError naming the path when it is missing or unreadable.
std::string read_log_file(const std::string& path, const std::string& hint);

// Lines of `text`. A non-empty last line without its newline means the file was cut short
// (every writer ends each line with one): throws ConfigError naming that line.
std::vector<LogLine> split_log_lines(const std::string& text, const std::string& path);

// Throws ConfigError("<path>:<line>", message, hint).
[[noreturn]] void throw_bad_line(const std::string& path, int64_t line, const std::string& message,
                                 const std::string& hint = "");

// Exact parsers: the whole word must be consumed, else throw_bad_line naming `what`.
double parse_exact_double(const std::string& word, const std::string& what, const std::string& path,
                          int64_t line);  // hex float, nan, inf
uint64_t parse_hex64(const std::string& word, const std::string& what, const std::string& path,
                     int64_t line);  // 16 hex digits
int64_t parse_integer(const std::string& word, const std::string& what, const std::string& path,
                      int64_t line);

}  // namespace titan

// Small string helpers shared by the config parser and the loggers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

// Levenshtein distance between a and b (case-sensitive).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo
// (distance more than max(2, len/3)).
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// "a", "b", "c" -> "\"a\", \"b\", \"c\"".
std::string join_quoted(const std::vector<std::string>& items);

// {3, 5, 8} -> "3, 5, 8" (with `separator` ", ").
std::string join_integers(const std::vector<int64_t>& values, const std::string& separator);

// The words of `line`, split at runs of whitespace.
std::vector<std::string> split_words(const std::string& line);

// The items of `text` separated by `sep`, each without surrounding whitespace ("1, 2" -> "1",
// "2"); "" gives no items, "1,,2" an empty middle one.
std::vector<std::string> split_list(const std::string& text, char sep);

// Parses a decimal number, or a hexadecimal one written "0x...": false unless `text` is entirely
// that (no sign, no spaces) and it fits.
bool parse_u64(const std::string& text, uint64_t& value);

bool starts_with(const std::string& s, const std::string& prefix);
bool ends_with(const std::string& s, const std::string& suffix);

// `v` exactly, as a hexadecimal float ("0x1.8p+1"): what the logs compare bit for bit.
std::string hex_float(double v);

// A number in a JSON report: json_float with 9 significant digits (a float's round trip),
// json_double with 17 (a double's). JSON has no NaN or infinity: those are null.
std::string json_float(double v);
std::string json_double(double v);

// 1234567 -> "1,234,567".
std::string with_thousands(long long value);

// `s` as a JSON string literal: in double quotes, with " and \ escaped and control characters as
// \u00XX. Bytes from 0x80 up pass through, so UTF-8 text stays UTF-8.
std::string json_quoted(const std::string& s);

}  // namespace titan

// Finding and reading a dataset's files (internal to lib/data): every file regular and bounded by
// the process's memory, every problem a ConfigError (exit 2, before any output) naming the file
// or the key that points at it.
#pragma once

#include <string>
#include <vector>

namespace titan {

[[noreturn]] void data_error(const std::string& where, const std::string& what,
                             const std::string& hint = "");

// The files to read: `path` itself, or the files of that folder whose names end with one of
// `extensions`, sorted. `path_key` ("training.dataset_path") is named when `path` is missing.
std::vector<std::string> list_data_files(const std::string& path,
                                         const std::vector<std::string>& extensions,
                                         const std::string& path_key);

// The whole file, at most the process's memory.
std::string read_data_file(const std::string& path);

// A text file's contents without a UTF-8 byte-order mark (editors on Windows write one).
std::string read_text_file(const std::string& path);

}  // namespace titan

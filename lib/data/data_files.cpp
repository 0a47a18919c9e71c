#include "data/data_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "util/error.h"
#include "util/files.h"
#include "util/memory_limit.h"
#include "util/strings.h"

namespace titan {
namespace fs = std::filesystem;

void data_error(const std::string& where, const std::string& what, const std::string& hint) {
  throw ConfigError(where, what, hint);
}

std::vector<std::string> list_data_files(const std::string& path,
                                         const std::vector<std::string>& extensions,
                                         const std::string& path_key) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    data_error(path_key, fmt::format("{}: {}", path, ec ? ec.message() : std::strerror(ENOENT)),
               "point " + path_key + " at an existing file or folder");
  }
  if (!fs::is_directory(status)) return {path};
  const auto wanted = [&](const std::string& name) {
    return std::any_of(extensions.begin(), extensions.end(),
                       [&](const std::string& e) { return ends_with(name, e); });
  };
  std::vector<std::string> files;
  fs::directory_iterator entries(path, ec);
  for (; !ec && entries != fs::directory_iterator(); entries.increment(ec)) {
    const fs::path& entry = entries->path();
    if (!wanted(entry.filename().string())) continue;
    // A file of the folder that is not a regular file (a FIFO, a device, a link that loops or
    // dangles) is named, not skipped: the user meant it as data.
    struct stat st {};
    if (::stat(entry.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      const int code = errno;
      data_error(entry.string(),
                 S_ISREG(st.st_mode) || st.st_mode == 0
                     ? std::string(std::strerror(code))
                     : "is " + file_type_name(st.st_mode) + ", not a regular file",
                 fmt::format("the data folder's {} files must be regular files",
                             fmt::join(extensions, " and ")));
    }
    files.push_back(entry.string());
  }
  if (ec) {
    data_error(path_key, fmt::format("{}: {}", path, ec.message()),
               "point " + path_key + " at a readable folder");
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    data_error(path_key,
               fmt::format("{}: no {} files in this folder", path, fmt::join(extensions, " or ")));
  }
  return files;
}

std::string read_data_file(const std::string& path) {
  try {
    return read_file(path, static_cast<uint64_t>(process_memory_limit().bytes));
  } catch (const std::system_error& e) {
    data_error(path, "cannot read: " + e.code().message(),
               e.code().value() == EFBIG ? "the file is larger than this process's memory" : "");
  }
}

std::string read_text_file(const std::string& path) {
  std::string text = read_data_file(path);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  return text;
}

}  // namespace titan

// Decompressing a .gz file held in memory (internal to lib/data).
#pragma once

#include <cstdint>
#include <string>

namespace titan {

// The decompressed bytes of `compressed` (gzip, every member of a multi-member file). Throws
// ConfigError naming `source` for data that is not gzip, cut short or corrupt, or that would
// decompress to more than `max_bytes`.
std::string gunzip(const std::string& compressed, const std::string& source, uint64_t max_bytes);

}  // namespace titan

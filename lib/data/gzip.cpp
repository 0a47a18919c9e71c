#include "data/gzip.h"

#include <fmt/format.h>
#include <zlib.h>

#include "data/data_files.h"

namespace titan {

std::string gunzip(const std::string& compressed, const std::string& source, uint64_t max_bytes) {
  z_stream z{};
  // 16 + MAX_WBITS: gzip framing only (a .gz file), with its CRC checked.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) data_error(source, "zlib could not start");
  std::string out;
  char buffer[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      data_error(source, fmt::format("decompresses to more than {} bytes", max_bytes),
                 "the decompressed data must fit in this process's memory");
    }
    if (rc == Z_STREAM_END && z.avail_in > 0) {
      inflateReset(&z);  // the next member of a concatenated gzip file
      continue;
    }
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK || (z.avail_in == 0 && z.avail_out != 0)) {
      const std::string reason = z.msg ? z.msg : rc == Z_OK ? "cut short" : "not gzip data";
      inflateEnd(&z);
      data_error(source, "cannot decompress: " + reason,
                 "the .json.gz files must be whole gzip files (gunzip -t checks one)");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace titan

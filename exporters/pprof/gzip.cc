#include "exporters/pprof/gzip.h"

#include <zlib.h>

#include "absl/status/status.h"

namespace gpuflame::exporters {

absl::StatusOr<std::string> Gzip(std::string_view data, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return absl::InternalError("deflateInit2 failed");
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InternalError("deflate failed");
  return out;
}

absl::StatusOr<std::string> Gunzip(std::string_view data, size_t max_output) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return absl::InternalError("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[64 << 10];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return absl::InvalidArgumentError("not valid gzip data");
    }
    const size_t produced = sizeof(buf) - zs.avail_out;
    // Checked before the bytes are kept: appending first let the string
    // double its capacity past the limit before the check said no (2.1 GB
    // for a 1 GiB limit).
    if (out.size() + produced > max_output) {
      inflateEnd(&zs);
      return absl::ResourceExhaustedError("gzip data expands beyond the limit");
    }
    out.append(buf, produced);
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) break;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InvalidArgumentError("truncated gzip data");
  return out;
}

}  // namespace gpuflame::exporters

#ifndef GPUFLAME_EXPORTERS_PPROF_GZIP_H_
#define GPUFLAME_EXPORTERS_PPROF_GZIP_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuflame::exporters {

// gzip (RFC 1952) with zlib: what pprof files and Pyroscope expect.
absl::StatusOr<std::string> Gzip(std::string_view data, int level = 6);
absl::StatusOr<std::string> Gunzip(std::string_view data, size_t max_output = 1u << 30);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PPROF_GZIP_H_

// Profile files a user hands a command (`gpuflame symbolize`, `gpuflame
// diff`): bytes from anywhere, so read with bounds. A hostile or mistaken file
// costs bounded memory: a 1 MB gzip holding one 1000 MiB string took 4.1 GB
// before symbolize had these limits. gpuflame's own profiles are far smaller:
// Pyroscope takes 4 MiB uncompressed, and record's whole-run profiles are a
// few MiB. Both limits are in `gpuflame --help`.
#ifndef GPUFLAME_EXPORTERS_PPROF_STORED_PROFILE_H_
#define GPUFLAME_EXPORTERS_PPROF_STORED_PROFILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuflame::exporters {

inline constexpr size_t kMaxStoredFileBytes = 256u << 20;     // the file as stored
inline constexpr size_t kMaxStoredProfileBytes = 256u << 20;  // the profile, inflated
// Parsed, a profile's bytes are not what bounds its memory: an empty sample
// is 2 bytes on the wire and ~120 in memory (40 MB of them took 2.4 GB), so
// what parsing would make is counted first (CountPprofElements). 4 M of them
// are ~500 MB parsed; gpuflame's profiles have a few hundred thousand.
inline constexpr uint64_t kMaxStoredProfileElements = 4'000'000;

// |path|'s bytes, at most kMaxStoredFileBytes; errors name |path| and say
// that |reader| ("symbolize") reads no more.
absl::StatusOr<std::string> ReadStoredFile(const std::string& path, std::string_view reader);

// gzip's magic bytes: pprof files may be stored either way.
bool IsGzipped(std::string_view bytes);

// |bytes| inflated if they are gzipped, else as they are; inflating stops at
// kMaxStoredProfileBytes (a gzip bomb stops there). Errors name |origin|.
absl::StatusOr<std::string> InflateStoredProfile(std::string bytes, const std::string& origin, std::string_view reader);

// How many objects parsing |pprof| (profile.proto bytes) makes: its samples
// and their labels, locations and their lines, functions, mappings, strings
// and the rest, counted on the wire without parsing. InvalidArgument for
// bytes that are not protobuf's wire format.
absl::StatusOr<uint64_t> CountPprofElements(std::string_view pprof);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PPROF_STORED_PROFILE_H_

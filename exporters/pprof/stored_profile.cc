#include "exporters/pprof/stored_profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "exporters/pprof/gzip.h"

namespace gpuflame::exporters {

absl::StatusOr<std::string> ReadStoredFile(const std::string& path, std::string_view reader) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read %s", path));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxStoredFileBytes)
    return absl::ResourceExhaustedError(absl::StrFormat("%s: %d MiB, more than the %d MiB %s reads", path,
                                                        st.st_size >> 20, kMaxStoredFileBytes >> 20, reader));
  // Read up to the limit, not by the size stat said: the file may grow, or
  // not be a regular file at all.
  std::string bytes;
  if (st.st_size > 0) bytes.reserve(std::min(static_cast<size_t>(st.st_size), kMaxStoredFileBytes) + 1);
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)).gcount() > 0) {
    const auto n = static_cast<size_t>(in.gcount());
    // Checked before the bytes are kept: the string never grows for bytes
    // past the limit.
    if (bytes.size() + n > kMaxStoredFileBytes)
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: more than the %d MiB %s reads", path, kMaxStoredFileBytes >> 20, reader));
    bytes.append(chunk, n);
  }
  if (in.bad()) return absl::DataLossError(absl::StrFormat("cannot read %s", path));
  return bytes;
}

bool IsGzipped(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

absl::StatusOr<std::string> InflateStoredProfile(std::string bytes, const std::string& origin,
                                                 std::string_view reader) {
  if (!IsGzipped(bytes)) return bytes;
  auto raw = Gunzip(bytes, kMaxStoredProfileBytes);
  if (absl::IsResourceExhausted(raw.status()))
    return absl::ResourceExhaustedError(absl::StrFormat("%s: the profile inflates to more than the %d MiB %s reads",
                                                        origin, kMaxStoredProfileBytes >> 20, reader));
  if (!raw.ok()) return absl::InvalidArgumentError(absl::StrFormat("%s: %s", origin, raw.status().message()));
  return raw;
}

}  // namespace gpuflame::exporters

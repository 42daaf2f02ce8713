#include "exporters/pprof/stored_profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "exporters/pprof/gzip.h"
#include "google/protobuf/io/coded_stream.h"

namespace gpuflame::exporters {
namespace {

using google::protobuf::io::CodedInputStream;

// Counts the length-delimited fields of the message |in| is at (each a
// message, a string or a packed array: one object each) and, |depth| levels
// down, those of the messages among them: profile.proto nests messages two
// deep (a sample's labels, a location's lines). False for what is not wire
// format; unknown fields count as they would be kept.
bool CountFields(CodedInputStream& in, int depth, uint64_t& count) {
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    if ((tag >> 3) == 0) return false;
    uint64_t varint;
    uint32_t fixed32, length;
    switch (tag & 7) {
      case 0:
        if (!in.ReadVarint64(&varint)) return false;
        break;
      case 1:
        if (!in.ReadLittleEndian64(&varint)) return false;
        break;
      case 5:
        if (!in.ReadLittleEndian32(&fixed32)) return false;
        break;
      case 2: {
        // A length past what an int holds is past any buffer we read.
        if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT_MAX)) return false;
        count++;
        if (depth == 0) {
          if (!in.Skip(static_cast<int>(length))) return false;
          break;
        }
        // Not every length-delimited field is a message (strings, packed
        // arrays): one that does not read as one counts as itself alone.
        const int before = in.CurrentPosition();
        const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
        uint64_t inner = 0;
        const bool message = CountFields(in, depth - 1, inner) && in.BytesUntilLimit() == 0;
        in.PopLimit(limit);
        if (message) count += inner;
        if (!in.Skip(static_cast<int>(length) - (in.CurrentPosition() - before))) return false;
        break;
      }
      default: return false;  // groups: not in profile.proto, nor in any protobuf of today
    }
  }
  // At the end of the bytes or the limit; not at a tag 0 within them.
  return in.ConsumedEntireMessage();
}

}  // namespace

absl::StatusOr<uint64_t> CountPprofElements(std::string_view pprof) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(pprof.data()), static_cast<int>(pprof.size()));
  uint64_t count = 0;
  if (!CountFields(in, 2, count)) return absl::InvalidArgumentError("not a pprof profile");
  return count;
}

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

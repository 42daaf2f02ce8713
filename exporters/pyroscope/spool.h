// Push requests kept on disk while Pyroscope is unreachable, so that an
// outage or an agent restart loses nothing: one zstd-compressed file per
// request, replayed oldest first, bounded in total size (the oldest go first
// when full, counted). A request that got part way (legacy /ingest) is
// rewritten with only what is left, so nothing taken is sent again after a
// restart either.
//
// File: <dir>/<20-digit sequence>.push
//   "GFSPOOL2" | zstd frame, with content checksum, of
//                (u32 profile count, little endian | serialized push.v1.PushRequest)
// Files of version 1 ("GFSPOOL1" | u32 count | zstd frame of the request) are
// still read.
//
// Not thread-safe: PushQueue serializes access.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuflame::exporters {

struct SpooledRequest {
  uint64_t sequence = 0;
  uint32_t series = 0;  // profiles (one per series as gpuflame writes them)
  std::string body;     // serialized PushRequest
};

// A spool file's request from the file's bytes, for readers other than the
// agent (`gpuflame diff` takes spooled windows); InvalidArgument saying why
// when they are not one. The request itself is not parsed here.
bool IsSpoolFile(std::string_view raw);
absl::StatusOr<SpooledRequest> DecodeSpoolFile(const std::string& raw);

class Spool {
 public:
  // Creates |dir| if needed and indexes what an earlier run left there.
  static absl::StatusOr<Spool> Open(const std::string& dir, uint64_t max_bytes);

  // The new file's sequence number.
  absl::StatusOr<uint64_t> Put(const std::string& body, uint32_t series);
  // The oldest request, or nullopt when empty. Unreadable files are removed
  // and counted as corrupt.
  std::optional<SpooledRequest> Oldest();
  // The oldest sequence other than |skip|, if any.
  std::optional<uint64_t> OldestExcept(uint64_t skip) const;
  // Request |sequence|, or nullopt when it is gone or damaged (then removed,
  // counted as corrupt and said once on stderr).
  std::optional<SpooledRequest> Read(uint64_t sequence);
  // Replaces request |sequence| with what is left of it, atomically (a
  // rename): a crash leaves the old or the new request, never half of one.
  absl::Status Replace(uint64_t sequence, const std::string& body, uint32_t series);
  void Remove(uint64_t sequence);
  // A request being sent is never removed to make room (it would be counted
  // both as delivered and as dropped); UINT64_MAX pins nothing.
  void set_pinned(uint64_t sequence) { pinned_ = sequence; }

  bool empty() const { return files_.empty(); }
  bool contains(uint64_t sequence) const;
  size_t count() const { return files_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t dropped_full() const { return dropped_full_; }
  uint64_t corrupt() const { return corrupt_; }

 private:
  struct File {
    uint64_t sequence;
    uint64_t size;
  };
  std::string PathOf(uint64_t sequence) const;

  std::string dir_;
  uint64_t max_bytes_ = 0;
  std::vector<File> files_;  // ascending sequence
  uint64_t bytes_ = 0;
  uint64_t next_ = 0;
  uint64_t dropped_full_ = 0;
  uint64_t corrupt_ = 0;
  uint64_t pinned_ = UINT64_MAX;
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_

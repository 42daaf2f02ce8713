// Push requests kept on disk while Pyroscope is unreachable, so that an
// outage or an agent restart loses nothing: one zstd-compressed file per
// request, replayed oldest first, bounded in total size (the oldest go first
// when full, counted).
//
// File: <dir>/<20-digit sequence>.push
//   "GFSPOOL1" | u32 series count (little endian) | zstd frame of a serialized
//   push.v1.PushRequest
//
// Not thread-safe: PushQueue serializes access.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuflame::exporters {

struct SpooledRequest {
  uint64_t sequence = 0;
  uint32_t series = 0;
  std::string body;  // serialized PushRequest
};

class Spool {
 public:
  // Creates |dir| if needed and indexes what an earlier run left there.
  static absl::StatusOr<Spool> Open(const std::string& dir, uint64_t max_bytes);

  absl::Status Put(const std::string& body, uint32_t series);
  // The oldest request, or nullopt when empty. Unreadable files are removed
  // and counted as corrupt.
  std::optional<SpooledRequest> Oldest();
  void Remove(uint64_t sequence);

  bool empty() const { return files_.empty(); }
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
};

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_SPOOL_H_

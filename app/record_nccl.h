// `record`'s NCCL view (profiler/collectives/): each hang said on the
// terminal while it is still stuck and again when it is over, then, with
// the rest, the `nccl` profile, the end-of-run lines and summary.json's
// "nccl". Record's loop thread, as the rest of the session's state.
#ifndef GPUFLAME_APP_RECORD_NCCL_H_
#define GPUFLAME_APP_RECORD_NCCL_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile.h"
#include "profiler/pipeline/session.h"

namespace gpuflame::profiler {

class RecordNccl {
 public:
  RecordNccl(bool quiet, double hang_seconds) : quiet_(quiet), hang_seconds_(hang_seconds) {}
  // Before the first record: the threshold goes to the tracker.
  void Start(Session& session) const;
  // From the loop: calls stuck past the threshold become hangs, said at
  // once; hangs that ended are said too.
  void Tick(Session& session, uint64_t now_ns);
  // The recording ended (every record in): calls still in flight are charged.
  void Finish(Session& session, uint64_t now_ns);

  std::optional<Profile> BuildProfile(const Session& session, const absl::flat_hash_map<pid_t, std::string>& comm,
                                      int64_t time_nanos, int64_t duration_nanos) const;
  std::string Json(const Session& session, const absl::flat_hash_map<pid_t, std::string>& comm,
                   uint64_t start_ns) const;
  std::vector<std::string> Lines(const Session& session) const;
  // One line per hang, as it ended (or was left at the end), and per
  // communicator's straggler, for the HTML page.
  std::vector<std::string> HangLines(const Session& session) const;

 private:
  void Say(Session& session, uint64_t now_ns);
  bool quiet_;
  double hang_seconds_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_NCCL_H_

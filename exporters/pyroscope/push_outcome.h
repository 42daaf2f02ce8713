// What one push attempt settled, and how a request that got part way is
// resumed without sending again what was taken.
//
// Connect and gRPC send a push.v1.PushRequest whole: Pyroscope takes it or
// not. The legacy /ingest API takes one profile per call, so an attempt can
// get part way through a request; the profiles it settled (accepted, or
// refused for good) must not be sent again: a retry of the whole request
// counted every accepted profile twice (684 MiB received for 114 MiB
// allocated with a 503 on every third call), and could never finish a
// request of three profiles or more.
//
// A "profile" is one sample of one series: the unit /ingest posts. gpuflame
// writes one sample per series, so profiles and series are the same count.
// Any thread: no state.
#ifndef GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_OUTCOME_H_
#define GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_OUTCOME_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuflame::exporters {

// Errors a later attempt can fix: Pyroscope away, overloaded, or slow.
bool IsRetryable(const absl::Status& s);

struct PushOutcome {
  // The whole request's status (Connect, gRPC): OK, retryable (nothing
  // taken), or refused for good (all of it).
  PushOutcome(absl::Status s) : status(std::move(s)) {}  // NOLINT: implicit by design
  PushOutcome() = default;
  static PushOutcome Partial(uint32_t settled, uint32_t rejected, absl::Status stopped_by) {
    PushOutcome o(std::move(stopped_by));
    o.partial = true;
    o.settled = settled;
    o.rejected = rejected;
    return o;
  }

  absl::Status status;
  // Set by /ingest: the counts below are what happened, and |status| is the
  // retryable error that stopped the attempt (OK when it went through).
  bool partial = false;
  uint32_t settled = 0;   // leading profiles done: never to be sent again
  uint32_t rejected = 0;  // of those, refused for good
  std::string rejection;  // why the last one was refused
};

// The number of profiles in a serialized push.v1.PushRequest.
absl::StatusOr<uint32_t> CountProfiles(const std::string& push_request);
// |push_request| without its first |n| profiles (series left with none go).
absl::StatusOr<std::string> DropLeadingProfiles(const std::string& push_request, uint32_t n);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PYROSCOPE_PUSH_OUTCOME_H_

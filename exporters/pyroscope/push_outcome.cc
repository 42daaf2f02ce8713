#include "exporters/pyroscope/push_outcome.h"

#include "push.pb.h"  // generated from exporters/proto/push.proto

namespace gpuflame::exporters {

bool IsRetryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsDeadlineExceeded(s);
}

absl::StatusOr<uint32_t> CountProfiles(const std::string& push_request) {
  push::v1::PushRequest req;
  if (!req.ParseFromString(push_request)) return absl::InvalidArgumentError("not a push request");
  uint64_t n = 0;
  for (const auto& series : req.series()) n += static_cast<uint64_t>(series.samples_size());
  if (n > UINT32_MAX) return absl::InvalidArgumentError("too many profiles in one push request");
  return static_cast<uint32_t>(n);
}

absl::StatusOr<std::string> DropLeadingProfiles(const std::string& push_request, uint32_t n) {
  push::v1::PushRequest req;
  if (!req.ParseFromString(push_request)) return absl::InvalidArgumentError("not a push request");
  push::v1::PushRequest rest;
  uint32_t skipped = 0;
  for (auto& series : *req.mutable_series()) {
    const auto samples = static_cast<uint32_t>(series.samples_size());
    if (skipped + samples <= n) {
      skipped += samples;
      continue;
    }
    auto* kept = rest.add_series();
    *kept->mutable_labels() = std::move(*series.mutable_labels());
    for (int i = static_cast<int>(n > skipped ? n - skipped : 0); i < series.samples_size(); i++)
      *kept->add_samples() = std::move(*series.mutable_samples(i));
    skipped = n > skipped ? n : skipped;
  }
  if (skipped < n) return absl::InvalidArgumentError("fewer profiles in the push request than settled");
  return rest.SerializeAsString();
}

}  // namespace gpuflame::exporters

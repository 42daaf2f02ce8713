// The difference of two pprof profiles as a profile of its own: what `go tool
// pprof -diff_base BASE NEW` shows, stored so that any pprof reader (go tool
// pprof, Pyroscope, Parca) shows it without BASE at hand. As pprof builds it
// (internal/driver/fetch.go, profile/merge.go): NEW's samples as they are,
// then BASE's with every value negated and the label pprof::base=true, which
// is how pprof knows a diff and takes BASE's total as 100%. Headers combine
// as pprof.Merge combines them, and a side without mappings gets the empty
// one pprof's driver gives it, so that even the views' headers are the same.
// Equal strings, functions, mappings and locations are stored once.
//
// Profiles come from files a user names, so every reference is checked
// before use, as pprof checks a profile it reads (Profile.CheckValid).
// Any thread may call these; they share nothing.
#ifndef GPUFLAME_EXPORTERS_DIFF_PPROF_DIFF_H_
#define GPUFLAME_EXPORTERS_DIFF_PPROF_DIFF_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profile.pb.h"  // generated from exporters/proto/profile.proto

namespace gpuflame::exporters {

// The label pprof gives BASE's samples in a diff (profile.Sample.DiffBaseSample).
inline constexpr const char* kDiffBaseLabel = "pprof::base";

// OK when |p| is a profile pprof would read: at least one sample type, every
// string index in the table, ids non-zero and unique, one value per sample
// type, every location and function a sample or line names present.
absl::Status ValidatePprof(const pprof::Profile& p);

// The sample types two profiles share, matched by name and unit, and those
// only one side has. pprof diffs only profiles whose types are the same in
// the same order (profile.compatible); gpuflame's profiles of one kind may
// differ in their optional types (alloc_samples where tensor allocations
// were sampled by bytes, observed_time where CUPTI activity was duty-cycled,
// and the types a profile of an older gpuflame lacks: peak_*, unused_*), and
// the types both sides have are still a diff.
struct SampleTypeMatch {
  // For each shared type, in NEW's order, its index in NEW and in BASE.
  std::vector<int> neu, base;
  // "alloc_samples/count": the types left out of the diff, by side.
  std::vector<std::string> only_in_base, only_in_new;
  bool complete() const { return only_in_base.empty() && only_in_new.empty(); }
};

// The match, or why the two cannot be diffed: no type in common ("they
// measure different things: BASE has cpu/nanoseconds; NEW has
// alloc_objects/count, alloc_space/bytes"), or different period types
// (pprof's other test of the same kind of profile).
absl::StatusOr<SampleTypeMatch> MatchSampleTypes(const pprof::Profile& base, const pprof::Profile& neu);

// What a diff with a partial match left out, and why, in one sentence:
// "diffed the 6 sample types both have; only BASE has alloc_samples/count
// (allocations seen where tensor allocations were sampled by bytes), left
// out". Empty for a complete match.
std::string DescribeLeftOut(const SampleTypeMatch& match);

// NEW minus BASE, both valid (checked again here), in the sample types both
// have (MatchSampleTypes). Where the types are the same, nothing is added of
// gpuflame's own, not even a comment saying what was diffed: pprof prints
// comments in every view's header, and the views must be -diff_base's.
// Where some were left out (no -diff_base to be like), a comment says which
// and why (DescribeLeftOut), so that the file says it to any reader.
absl::StatusOr<pprof::Profile> DiffPprof(const pprof::Profile& base, const pprof::Profile& neu);

// "alloc_objects/count, alloc_space/bytes"
std::string DescribeSampleTypes(const pprof::Profile& p);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_PPROF_DIFF_H_

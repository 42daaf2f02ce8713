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

// OK when pprof would diff the two (profile.compatible): the same sample
// types with the same units in the same order, and the same period type.
// The message names both sides' types: "BASE has cpu/nanoseconds; NEW has
// alloc_objects/count, alloc_space/bytes".
absl::Status CheckDiffable(const pprof::Profile& base, const pprof::Profile& neu);

// NEW minus BASE, both valid and diffable (checked again here). Nothing is
// added of gpuflame's own, not even a comment saying what was diffed: pprof
// prints comments in every view's header, and the views must be -diff_base's.
absl::StatusOr<pprof::Profile> DiffPprof(const pprof::Profile& base, const pprof::Profile& neu);

// "alloc_objects/count, alloc_space/bytes"
std::string DescribeSampleTypes(const pprof::Profile& p);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_PPROF_DIFF_H_

// What `gpuflame diff` compares, read from what a user names: a pprof file
// (gzipped or not: gpuflame's, or any other tool's), a `record` output
// directory (each of its *.pb.gz / *.pb files), or a file of the agent's disk
// spool (exporters/pyroscope/spool.h: one push request of a window, with a
// series per process and profile), and how the two sides pair up.
//
// Every byte is untrusted (a file from anywhere, a spool a crash may have
// cut): reads and inflation are bounded (stored_profile.h; per side at most
// kMaxSideProfiles profiles, kMaxSideBytes inflated and, counted before
// parsing, kMaxSideElements samples, locations, strings and the like), each
// profile is checked as pprof checks one (ValidatePprof), and
// errors name the file.
// Any thread may call these.
#ifndef GPUFLAME_EXPORTERS_DIFF_DIFF_INPUTS_H_
#define GPUFLAME_EXPORTERS_DIFF_DIFF_INPUTS_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "profile.pb.h"  // generated from exporters/proto/profile.proto

namespace gpuflame::exporters {

inline constexpr size_t kMaxSideProfiles = 1024;
inline constexpr size_t kMaxSideBytes = 512u << 20;
// Half of what symbolize parses (stored_profile.h): both sides and their
// diff are held at once. At this bound, two sides of the smallest samples
// took 1.5 GB with 4 M each, and take ~750 MB with 2 M.
inline constexpr uint64_t kMaxSideElements = 2'000'000;

struct InputProfile {
  // "torch_memory": a file's name less .pb.gz or .pb, a series' __name__.
  std::string kind;
  // A spooled series' other labels, in the order the agent wrote them.
  std::vector<std::pair<std::string, std::string>> labels;
  // Where it came from, for messages: "run1/torch_memory.pb.gz",
  // "spool/00000000000000000007.push: torch_memory{service_name=python3, pid=42}".
  std::string origin;
  pprof::Profile profile;  // valid (ValidatePprof)

  // "torch_memory", or "torch_memory{pid=42, process=python3}" for a series.
  std::string DisplayName() const;
};

struct DiffSide {
  std::string path;
  std::vector<InputProfile> profiles;
};

// The profiles in |bytes|, a file's content (|origin| names it in errors):
// a spool file's series, or one pprof profile of kind |kind|.
absl::StatusOr<std::vector<InputProfile>> ProfilesFromBytes(std::string bytes, const std::string& origin,
                                                            const std::string& kind);

// The profiles at |path|: a file as above, or a directory's *.pb.gz and *.pb
// files (not its *.diff.pb.gz: diff's own output), by name.
absl::StatusOr<DiffSide> LoadDiffSide(const std::string& path);

struct DiffPair {
  const InputProfile* base;
  const InputProfile* neu;
  std::string name;  // NEW's DisplayName()
};
struct Pairing {
  std::vector<DiffPair> pairs;
  std::vector<std::string> only_in_base, only_in_new;  // origins
};
// Which profile of BASE goes with which of NEW: two lone profiles with each
// other, whatever their names (two runs' files); otherwise by kind and labels
// (two record directories, two windows of the same processes), then by kind
// alone where each side has one profile of that kind left (a record
// directory against one process's window).
Pairing PairProfiles(const DiffSide& base, const DiffSide& neu);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_DIFF_INPUTS_H_

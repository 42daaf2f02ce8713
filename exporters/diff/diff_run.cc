#include "exporters/diff/diff_run.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "exporters/diff/pprof_diff.h"
#include "profiler/aggregate/profile_builder.h"

namespace gpuflame::exporters {
namespace {

std::string Safe(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 100))
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  // Never a hidden file, ".", ".." or a name of nothing.
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out;
}

bool IsMemoryLevel(const std::string& kind) {
  return kind == profiler::kGpuMemoryProfile || kind == profiler::kTorchMemoryProfile;
}

// Device memory against tensor memory is no change of either: refused by
// kind, since their sample types are the same.
absl::Status CheckSameLevel(const InputProfile& base, const InputProfile& neu) {
  if (base.kind == neu.kind || !IsMemoryLevel(base.kind) || !IsMemoryLevel(neu.kind)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("they are different profiles: BASE is ", base.kind, ", NEW is ",
                                                    neu.kind,
                                                    " (gpu_memory is device memory, torch_memory PyTorch's tensors)"));
}

}  // namespace

std::string FileStem(const InputProfile& profile, std::vector<std::string>& taken) {
  std::string stem = Safe(profile.kind);
  for (const auto& [key, value] : profile.labels)
    if (key == "pid") absl::StrAppend(&stem, ".pid", Safe(value));
  std::string unique = stem;
  for (int n = 2; std::find(taken.begin(), taken.end(), unique) != taken.end(); n++)
    unique = absl::StrCat(stem, ".", n);
  taken.push_back(unique);
  return unique;
}

DiffRun DiffSides(const DiffSide& base, const DiffSide& neu) {
  Pairing pairing = PairProfiles(base, neu);
  DiffRun run;
  run.only_in_base = std::move(pairing.only_in_base);
  run.only_in_new = std::move(pairing.only_in_new);
  std::vector<std::string> taken;
  for (const DiffPair& pair : pairing.pairs) {
    DiffOutcome o;
    o.name = pair.name;
    o.stem = FileStem(*pair.neu, taken);
    o.base_origin = pair.base->origin;
    o.new_origin = pair.neu->origin;
    if (auto s = CheckSameLevel(*pair.base, *pair.neu); !s.ok()) {
      o.status = s;
      run.outcomes.push_back(std::move(o));
      continue;
    }
    absl::StatusOr<pprof::Profile> diff = DiffPprof(pair.base->profile, pair.neu->profile);
    if (diff.ok()) {
      o.diff = std::move(*diff);
      o.tree = DiffTree::FromPprof(o.diff);
      o.left_out = DescribeLeftOut(*MatchSampleTypes(pair.base->profile, pair.neu->profile));
    } else {
      o.status = diff.status();
    }
    run.outcomes.push_back(std::move(o));
  }
  return run;
}

}  // namespace gpuflame::exporters

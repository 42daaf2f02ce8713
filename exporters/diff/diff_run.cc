#include "exporters/diff/diff_run.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "exporters/diff/pprof_diff.h"

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
    absl::StatusOr<pprof::Profile> diff = DiffPprof(pair.base->profile, pair.neu->profile);
    if (diff.ok()) {
      o.diff = std::move(*diff);
      o.tree = DiffTree::FromPprof(o.diff);
    } else {
      o.status = diff.status();
    }
    run.outcomes.push_back(std::move(o));
  }
  return run;
}

}  // namespace gpuflame::exporters

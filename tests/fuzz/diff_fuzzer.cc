// Fuzz target for `gpuflame diff`'s inputs and all that is made of them
// (exporters/diff: ProfilesFromBytes for each side, PairProfiles, DiffPprof,
// DiffTree, the HTML data and the summary): two files a user names, from
// anywhere, each a pprof profile (gzipped or not) or a file of the agent's
// spool. The files themselves are read by ReadStoredFile, which the
// pprof_symbolize target covers.
//
// Input: BASE's length as 4 bytes, little endian, then BASE's bytes, then
// NEW's (the rest); a length past the end gives BASE all there is. Seeds:
// pairs of real profiles from two record runs of tests/workloads/diff_runs.py,
// and of spool files (make_diff_seeds.py).
//
// Checked beyond crashes: a diff that is made is a valid profile
// (ValidatePprof) with the sample types both sides have (what else either
// has said in its comments), whose values per sample type sum
// to NEW's less BASE's (exactly, in 128 bits, unless a BASE value is
// INT64_MIN, whose negation saturates); its tree's root holds both sides'
// sums where none saturates; the summary and the HTML page are made.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "exporters/diff/diff_html.h"
#include "exporters/diff/diff_inputs.h"
#include "exporters/diff/diff_run.h"
#include "exporters/diff/diff_summary.h"
#include "exporters/diff/pprof_diff.h"
#include "fuzz_check.h"

namespace {

using gpuflame::exporters::DiffSide;

// Sums per sample type, in 128 bits: no overflow for any profile; and
// whether some running sum in 64 bits could saturate (the sum of magnitudes
// does not fit).
struct Sum {
  __int128 sum = 0;
  __int128 magnitude = 0;
  bool exact() const { return magnitude <= INT64_MAX; }
};
std::vector<Sum> Sums(const gpuflame::pprof::Profile& p, bool negate, bool* saturates) {
  std::vector<Sum> out(p.sample_type_size());
  for (const auto& s : p.sample())
    for (int t = 0; t < s.value_size() && t < p.sample_type_size(); t++) {
      if (negate && s.value(t) == INT64_MIN) *saturates = true;
      const __int128 v = negate ? -static_cast<__int128>(s.value(t)) : s.value(t);
      out[t].sum += v;
      out[t].magnitude += v < 0 ? -v : v;
    }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t base_size;
  std::memcpy(&base_size, data, 4);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 4, size - 4);
  const std::string_view base_bytes = rest.substr(0, base_size), new_bytes = rest.substr(base_bytes.size());

  auto base = gpuflame::exporters::ProfilesFromBytes(std::string(base_bytes), "base.pb.gz", "base");
  auto neu = gpuflame::exporters::ProfilesFromBytes(std::string(new_bytes), "new.pb.gz", "new");
  if (!base.ok() || !neu.ok()) {
    FUZZ_CHECK(!(base.ok() ? neu : base).status().message().empty());
    return 0;
  }
  DiffSide base_side{"base.pb.gz", std::move(*base)}, new_side{"new.pb.gz", std::move(*neu)};
  for (const DiffSide* side : {&base_side, &new_side})
    for (const auto& p : side->profiles) FUZZ_CHECK(gpuflame::exporters::ValidatePprof(p.profile).ok());

  gpuflame::exporters::DiffRun run = gpuflame::exporters::DiffSides(base_side, new_side);
  FUZZ_CHECK(run.outcomes.size() <= std::min(base_side.profiles.size(), new_side.profiles.size()));
  std::vector<gpuflame::exporters::DiffView> views;
  for (const auto& o : run.outcomes) {
    if (!o.status.ok()) {
      FUZZ_CHECK(!o.status.message().empty());
      continue;
    }
    FUZZ_CHECK(gpuflame::exporters::ValidatePprof(o.diff).ok());
    // The pair behind the outcome, found again by origin.
    const gpuflame::pprof::Profile *b = nullptr, *n = nullptr;
    for (const auto& p : base_side.profiles)
      if (p.origin == o.base_origin) b = &p.profile;
    for (const auto& p : new_side.profiles)
      if (p.origin == o.new_origin) n = &p.profile;
    FUZZ_CHECK(b && n);
    // The types both have, in NEW's order; what was left out said in a comment.
    const auto match = gpuflame::exporters::MatchSampleTypes(*b, *n);
    FUZZ_CHECK(match.ok());
    FUZZ_CHECK(o.diff.sample_type_size() == static_cast<int>(match->neu.size()));
    FUZZ_CHECK(o.left_out == gpuflame::exporters::DescribeLeftOut(*match));
    bool said = false;
    for (int64_t c : o.diff.comment())
      said |= !o.left_out.empty() && o.diff.string_table(static_cast<int>(c)) == "gpuflame diff: " + o.left_out;
    FUZZ_CHECK(said == !match->complete());
    bool saturates = false;
    const auto base_sums = Sums(*b, true, &saturates), new_sums = Sums(*n, false, &saturates);
    const auto diff_sums = Sums(o.diff, false, &saturates);
    FUZZ_CHECK(o.tree.has_value());
    for (size_t t = 0; t < match->neu.size(); t++) {
      const Sum& bs = base_sums[match->base[t]];
      const Sum& ns = new_sums[match->neu[t]];
      if (!saturates) FUZZ_CHECK(diff_sums[t].sum == ns.sum + bs.sum);
      if (bs.exact() && ns.exact() && !saturates) {
        FUZZ_CHECK(o.tree->base(0, t) == -bs.sum);
        FUZZ_CHECK(o.tree->neu(0, t) == ns.sum);
      }
    }
    FUZZ_CHECK(!gpuflame::exporters::DiffSummary(o.name, *o.tree).empty());
    views.push_back({o.name, &*o.tree});
  }
  const std::string html = gpuflame::exporters::DiffFlameGraphHtml(views, "base", "new", "fuzz");
  // The data block holds no '<' at all (names are escaped), so no name can
  // close it and run as script.
  const std::string open = "<script id=\"gpuflame-data\" type=\"application/json\">";
  const size_t block = html.find(open);
  FUZZ_CHECK(block != std::string::npos);
  const size_t end = html.find("</script>", block);
  FUZZ_CHECK(end != std::string::npos);
  FUZZ_CHECK(html.substr(block + open.size(), end - block - open.size()).find('<') == std::string::npos);
  FUZZ_CHECK(html.find("\"diff\":{", block) < end);
  return 0;
}

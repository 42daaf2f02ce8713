#include "profiler/forensics/growth_report.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/human_units.h"
#include "base/json_string.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/forensics/stack_names.h"

namespace gpuflame::profiler {
namespace {

using base::HumanBytes;

// Seconds from the first boundary (the recording's start) to |ns|.
double SecondsFromStart(const GrowthTracker& growth, uint64_t ns) {
  const std::vector<uint64_t>& t = growth.boundary_times();
  return t.empty() || ns < t.front() ? 0.0 : static_cast<double>(ns - t.front()) / 1e9;
}

std::string StackJson(const GrowthTracker& growth, const GrowingStack& g, StackSource source) {
  return absl::StrCat("{\"stack\": ", base::JsonString(FoldedStack(source.stacks.Get(g.stack).frames, source.frames)),
                      ", \"growth_bytes\": ", g.growth_bytes, ", \"intervals_grown\": ", g.intervals_grown,
                      ", \"intervals\": ", g.intervals, ", \"first_inuse_bytes\": ", g.first_inuse,
                      ", \"last_inuse_bytes\": ", g.last_inuse,
                      ", \"since_seconds\": ", absl::StrFormat("%.3f", SecondsFromStart(growth, g.since_ns)),
                      ", \"until_seconds\": ", absl::StrFormat("%.3f", SecondsFromStart(growth, g.until_ns)),
                      // Judged before its process's teardown (growth.h), which left it this much.
                      ", \"before_teardown\": ", g.before_teardown ? "true" : "false",
                      ", \"final_inuse_bytes\": ", g.before_teardown ? g.final_inuse : g.last_inuse, "}");
}

}  // namespace

const char* GrowthLevelName(uint8_t domain) { return domain == GF_DOMAIN_TORCH ? "torch_memory" : "gpu_memory"; }

std::string GrowthJson(const GrowthTracker& growth, const std::vector<GrowingStack>& growing, StackSource source,
                       const absl::flat_hash_map<pid_t, std::string>& comm) {
  const GrowthThresholds& t = growth.thresholds();
  std::string out =
      absl::StrCat("{\"intervals\": ", growth.intervals(),
                   ", \"interval_seconds\": ", absl::StrFormat("%.3f", static_cast<double>(growth.period_ns()) / 1e9),
                   ", \"thresholds\": {\"min_grown_share\": ", absl::StrFormat("%.4f", t.min_grown_share),
                   ", \"min_intervals_grown\": ", t.min_intervals_grown, ", \"min_bytes\": ", t.min_bytes,
                   ", \"min_process_share\": ", absl::StrFormat("%.4f", t.min_process_share), "}, \"processes\": [");
  // By process, then level; |growing| is largest first, and stays so.
  std::map<pid_t, std::map<uint8_t, std::vector<const GrowingStack*>>> by;
  for (const GrowingStack& g : growing) by[g.pid][g.domain].push_back(&g);
  bool first = true;
  for (const auto& [pid, levels] : by) {
    auto name = comm.find(pid);
    absl::StrAppend(&out, first ? "\n    " : ",\n    ", "{\"pid\": ", pid,
                    ", \"process\": ", base::JsonString(name == comm.end() ? "" : name->second));
    for (uint8_t domain : {uint8_t{GF_DOMAIN_GPU}, uint8_t{GF_DOMAIN_TORCH}}) {
      auto it = levels.find(domain);
      const size_t count = it == levels.end() ? 0 : it->second.size();
      absl::StrAppend(&out, ", \"", GrowthLevelName(domain), "\": [");
      for (size_t i = 0; i < count && i < kGrowthJsonStacks; i++)
        absl::StrAppend(&out, i ? ",\n      " : "\n      ", StackJson(growth, *it->second[i], source));
      absl::StrAppend(&out, count ? "\n    ]" : "]");
      if (count > kGrowthJsonStacks)
        absl::StrAppend(&out, ", \"", GrowthLevelName(domain), "_not_listed\": ", count - kGrowthJsonStacks);
    }
    out += "}";
    first = false;
  }
  absl::StrAppend(&out, by.empty() ? "]}" : "\n  ]}");
  return out;
}

std::vector<std::string> GrowthLines(const GrowthTracker& growth, const std::vector<GrowingStack>& growing,
                                     StackSource source) {
  std::vector<std::string> out;
  const std::string over = absl::StrCat(growth.intervals(), " interval", growth.intervals() == 1 ? "" : "s", " of ",
                                        base::HumanSeconds(static_cast<double>(growth.period_ns())));
  if (growing.empty()) {
    out.push_back(absl::StrCat("growing: no stack grew in most of its intervals (in use, ", over, ")"));
    return out;
  }
  out.push_back(absl::StrCat("growing (in use, ", over, "):"));
  for (size_t i = 0; i < growing.size() && i < kGrowthLines; i++) {
    const GrowingStack& g = growing[i];
    out.push_back(absl::StrFormat(
        "  pid %d %s +%s in %d/%d intervals (%s → %s since %.2f s%s) under `%s`", g.pid, GrowthLevelName(g.domain),
        HumanBytes(g.growth_bytes), g.intervals_grown, g.intervals, HumanBytes(g.first_inuse), HumanBytes(g.last_inuse),
        SecondsFromStart(growth, g.since_ns),
        g.before_teardown ? absl::StrCat(", until its teardown freed it to ", HumanBytes(g.final_inuse)) : "",
        ShortStack(source.stacks.Get(g.stack).frames, source.frames)));
  }
  if (growing.size() > kGrowthLines)
    out.push_back(absl::StrCat("  and ", growing.size() - kGrowthLines, " more in summary.json's growth"));
  return out;
}

}  // namespace gpuflame::profiler

#include "profiler/pipeline/guardrails.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "inspect/proc_stat.h"

namespace gpuflame::profiler {
namespace {

constexpr uint32_t kCpuLadder[] = {kShedNativeStacks, kShedCpuSamples, kSampleTensorEvents, kShedTensorEvents};
constexpr uint32_t kOverheadLadder[] = {kShedNativeStacks, kSampleTensorEvents | kThrift1, kThrift2, kThrift3};
constexpr uint32_t kMemLadder[] = {kShedNativeStacks, kFreezeStacks};
constexpr int kCpuSteps = std::size(kCpuLadder);
constexpr int kOverheadSteps = std::size(kOverheadLadder);
constexpr int kMemSteps = std::size(kMemLadder);

// Reads a small /proc/self file from offset 0 (these files are regenerated
// on each read from the start). Bounded: both are well under 1 KB.
bool ReadSmall(int fd, char* buf, size_t size) {
  ssize_t n = pread(fd, buf, size - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

std::string Bytes(uint64_t b) {
  return b >= (1ull << 30) ? absl::StrFormat("%.1f GiB", b / double(1ull << 30))
                           : absl::StrFormat("%.0f MiB", b / double(1ull << 20));
}

}  // namespace

std::string DescribeShed(uint32_t actions) {
  std::vector<std::string> parts;
  if (actions & kShedNativeStacks) parts.push_back("native stacks");
  if (actions & kShedCpuSamples) parts.push_back("CPU samples");
  if (actions & kShedTensorEvents) parts.push_back("tensor-level events");
  else if (actions & kSampleTensorEvents)
    parts.push_back("exact tensor-level events (the probes sample them by bytes)");
  if (const uint32_t thrift = ThriftLevel(actions))
    parts.push_back(absl::StrCat("the injection library's work (thrift level ", thrift, ": stack walks 1 in ",
                                 1u << (2 * thrift), ", duty-cycled kernel-time activity ",
                                 thrift == 1   ? "half"
                                 : thrift == 2 ? "a quarter"
                                               : "an eighth",
                                 " as often)"));
  if (actions & kFreezeStacks) parts.push_back("new stacks");
  return parts.empty() ? "nothing" : absl::StrJoin(parts, ", ");
}

Guardrails::Guardrails(GuardrailLimits limits)
    : Guardrails(limits, base::ScopedFd(open("/proc/self/stat", O_RDONLY | O_CLOEXEC)),
                 base::ScopedFd(open("/proc/self/statm", O_RDONLY | O_CLOEXEC))) {}

Guardrails::Guardrails(GuardrailLimits limits, base::ScopedFd stat, base::ScopedFd statm)
    : limits_(limits),
      stat_(std::move(stat)),
      statm_(std::move(statm)),
      ticks_per_s_(sysconf(_SC_CLK_TCK)),
      page_bytes_(sysconf(_SC_PAGESIZE)) {}

bool Guardrails::ReadCpuTicks(uint64_t& ticks) const {
  char buf[1024];
  if (!stat_ || !ReadSmall(stat_.get(), buf, sizeof(buf))) return false;
  auto t = inspect::CpuTicksFromStat(buf);
  if (!t) return false;
  ticks = *t;
  return true;
}

double Guardrails::CpuSeconds() const {
  uint64_t ticks = 0;
  if (ticks_per_s_ <= 0 || !ReadCpuTicks(ticks)) return -1;
  return static_cast<double>(ticks) / static_cast<double>(ticks_per_s_);
}

bool Guardrails::ReadUsage(int64_t now_ns, uint64_t bpf_ns, uint64_t workload_cpu_ns, Usage& out) {
  uint64_t ticks = 0;
  if (!statm_ || !ReadCpuTicks(ticks)) return false;
  char mbuf[256];
  unsigned long long pages = 0, resident = 0;
  if (!ReadSmall(statm_.get(), mbuf, sizeof(mbuf)) || std::sscanf(mbuf, "%llu %llu", &pages, &resident) != 2)
    return false;
  out.rss_bytes = resident * static_cast<uint64_t>(page_bytes_);
  reads_.push_back({now_ns, ticks, bpf_ns, workload_cpu_ns});
  while (reads_.size() > 2 && now_ns - reads_[1].at_ns >= kCpuWindowNs) reads_.erase(reads_.begin());
  out.cpu_cores = 0;
  const Read& first = reads_.front();
  const int64_t t0 = first.at_ns;
  if (now_ns - t0 >= 1'000'000'000 && ticks_per_s_ > 0 && ticks >= first.ticks)
    out.cpu_cores = (double(ticks - first.ticks) / double(ticks_per_s_)) / ((now_ns - t0) / 1e9);
  // At least 10 ms of the workload's CPU: a share of almost nothing is noise.
  out.overhead = -1;
  if (now_ns - t0 >= 1'000'000'000 && workload_cpu_ns >= first.workload_cpu_ns + 10'000'000 && bpf_ns >= first.bpf_ns)
    out.overhead = double(bpf_ns - first.bpf_ns) / double(workload_cpu_ns - first.workload_cpu_ns);
  return true;
}

uint32_t Guardrails::Check(int64_t now_ns, uint64_t bpf_ns, uint64_t workload_cpu_ns) {
  if (!limits_.enabled()) return actions_;
  Usage usage;
  if (!ReadUsage(now_ns, bpf_ns, workload_cpu_ns, usage)) return actions_;
  return Decide(now_ns, usage);
}

uint32_t Guardrails::ActionsFor() const {
  uint32_t a = 0;
  for (int i = 0; i < cpu_.level && i < kCpuSteps; i++) a |= kCpuLadder[i];
  for (int i = 0; i < overhead_.level && i < kOverheadSteps; i++) a |= kOverheadLadder[i];
  for (int i = 0; i < mem_.level && i < kMemSteps; i++) a |= kMemLadder[i];
  return a;
}

void Guardrails::Step(int64_t now_ns, int& level, int delta, std::string reason) {
  level += delta;
  uint32_t now = ActionsFor();
  if (now == actions_) return;  // the other ladder already sheds this
  actions_ = now;
  changes_.push_back({now_ns, actions_, std::move(reason)});
}

std::vector<std::string> Guardrails::Describe(int64_t start_ns) const {
  std::vector<std::string> out;
  for (const Change& c : changes_)
    out.push_back(absl::StrFormat("at +%.1f s (%s) gpuflame %s %s", (c.at_ns - start_ns) / 1e9, c.reason,
                                  c.actions ? "sheds" : "sheds nothing any more:",
                                  c.actions ? DescribeShed(c.actions) : "full profiling again"));
  return out;
}

void Guardrails::Rate(int64_t now_ns, Ladder& ladder, int steps, bool over, bool under, const std::string& over_reason,
                      const std::string& under_reason) {
  const bool may_step = ladder.last_step_ns < 0 || now_ns - ladder.last_step_ns >= kCpuStepNs;
  if (over && may_step && ladder.level < steps) {
    Step(now_ns, ladder.level, +1, over_reason);
    ladder.last_step_ns = now_ns;
    ladder.under_since_ns = -1;
  } else if (under && ladder.level > 0) {
    if (ladder.under_since_ns < 0) ladder.under_since_ns = now_ns;
    if (now_ns - ladder.under_since_ns >= kRecoverNs) {
      Step(now_ns, ladder.level, -1, under_reason);
      ladder.under_since_ns = now_ns;
    }
  } else if (!under) {
    ladder.under_since_ns = -1;
  }
}

uint32_t Guardrails::Decide(int64_t now_ns, Usage usage) {
  last_ = usage;
  if (limits_.max_cpu_cores > 0) {
    const double max = limits_.max_cpu_cores;
    Rate(now_ns, cpu_, kCpuSteps, usage.cpu_cores > max, usage.cpu_cores < max * kRecoverShare,
         absl::StrFormat("CPU %.2f cores > %g", usage.cpu_cores, max),
         absl::StrFormat("CPU back under budget (%.2f cores)", usage.cpu_cores));
  }
  // Unknown (-1: no workload CPU to judge by, none followed) is never over,
  // and counts as under: a workload gone idle or ended leaves no thrift
  // behind for the next. A thrift rung cuts the library's walks fourfold,
  // so it is taken back only well under a quarter of the budget, where
  // four times the cost still fits: else the ladder would oscillate.
  if (limits_.max_overhead > 0) {
    const double max = limits_.max_overhead;
    const double recover = overhead_.level >= 2 ? kRecoverShare / GF_THRIFT_SAMPLE_FACTOR : kRecoverShare;
    Rate(now_ns, overhead_, kOverheadSteps, usage.overhead > max, usage.overhead < max * recover,
         absl::StrFormat("overhead %.2f%% of the profiled processes' CPU > %g%%", usage.overhead * 100, max * 100),
         absl::StrFormat("overhead back under budget (%.2f%%)", usage.overhead * 100));
  }
  if (limits_.max_rss_bytes > 0) {
    if (usage.rss_bytes > limits_.max_rss_bytes && mem_.level < kMemSteps) {
      Step(now_ns, mem_.level, +1, absl::StrCat("RSS ", Bytes(usage.rss_bytes), " > ", Bytes(limits_.max_rss_bytes)));
      mem_.under_since_ns = -1;
    } else if (usage.rss_bytes < limits_.max_rss_bytes * kRecoverShare && mem_.level > 0) {
      if (mem_.under_since_ns < 0) mem_.under_since_ns = now_ns;
      if (now_ns - mem_.under_since_ns >= kRecoverNs) {
        Step(now_ns, mem_.level, -1, absl::StrCat("RSS back under budget (", Bytes(usage.rss_bytes), ")"));
        mem_.under_since_ns = now_ns;
      }
    } else if (usage.rss_bytes >= limits_.max_rss_bytes * kRecoverShare) {
      mem_.under_since_ns = -1;
    }
  }
  return actions_;
}

}  // namespace gpuflame::profiler

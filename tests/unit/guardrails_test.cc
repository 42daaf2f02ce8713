#include "profiler/pipeline/guardrails.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace gpuflame::profiler {
namespace {

constexpr int64_t kSec = 1'000'000'000;

GuardrailLimits Limits(double cores, uint64_t rss) {
  GuardrailLimits l;
  l.max_cpu_cores = cores;
  l.max_rss_bytes = rss;
  return l;
}

TEST(GuardrailsTest, ShedsCpuWorkInTheDocumentedOrderOneStepAtATime) {
  Guardrails g(Limits(0.5, 0), {}, {});
  int64_t t = kSec;
  EXPECT_EQ(g.Decide(t, {0.4, 0}), 0u);
  EXPECT_EQ(g.Decide(t += kSec, {0.9, 0}), kShedNativeStacks);
  EXPECT_EQ(g.Decide(t += 9 * kSec, {0.9, 0}), kShedNativeStacks) << "one step per 10 s";
  EXPECT_EQ(g.Decide(t += kSec, {0.9, 0}), kShedNativeStacks | kShedCpuSamples);
  // Tensor events are sampled before they go: the memory profiles stay, as estimates.
  const uint32_t sampled = kShedNativeStacks | kShedCpuSamples | kSampleTensorEvents;
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0.9, 0}), sampled);
  EXPECT_EQ(DescribeShed(g.actions()),
            "native stacks, CPU samples, exact tensor-level events (the probes sample them by bytes)");
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0.9, 0}), sampled | kShedTensorEvents);
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0.9, 0}), sampled | kShedTensorEvents) << "nothing more to shed";
  ASSERT_EQ(g.changes().size(), 4u);
  EXPECT_EQ(g.changes()[0].reason, "CPU 0.90 cores > 0.5");
  EXPECT_EQ(DescribeShed(g.actions()), "native stacks, CPU samples, tensor-level events");
}

// Over its budget inside the profiled processes, gpuflame takes only what
// cuts that time, and keeps every profile type: native stacks, then thrift
// asked of the injection library (with the probes' tensor events sampled),
// one level a step; never CPU samples or tensor events.
TEST(GuardrailsTest, OverheadTakesItsOwnLadderAndKeepsEveryProfile) {
  GuardrailLimits l = Limits(0, 0);
  l.max_overhead = 0.01;  // 1% of the workload's CPU time
  Guardrails g(l, {}, {});
  int64_t t = kSec;
  EXPECT_EQ(g.Decide(t, {0, 0, -1}), 0u) << "unknown is not over";
  EXPECT_EQ(g.Decide(t += kSec, {0, 0, 0.009}), 0u);
  EXPECT_EQ(g.Decide(t += kSec, {0, 0, 0.03}), kShedNativeStacks);
  EXPECT_EQ(g.changes()[0].reason, "overhead 3.00% of the profiled processes' CPU > 1%");
  EXPECT_EQ(g.Decide(t += 9 * kSec, {0, 0, 0.03}), kShedNativeStacks) << "one step per 10 s";
  const uint32_t thrift1 = kShedNativeStacks | kSampleTensorEvents | kThrift1;
  EXPECT_EQ(g.Decide(t += kSec, {0, 0, 0.02}), thrift1);
  EXPECT_EQ(ThriftLevel(g.actions()), 1u);
  EXPECT_EQ(DescribeShed(g.actions()),
            "native stacks, exact tensor-level events (the probes sample them by bytes), the injection library's "
            "work (thrift level 1: stack walks 1 in 4, duty-cycled kernel-time activity half as often)");
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0, 0, 0.02}), thrift1 | kThrift2);
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0, 0, 0.02}), thrift1 | kThrift2 | kThrift3);
  EXPECT_EQ(ThriftLevel(g.actions()), 3u);
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0, 0, 0.02}), thrift1 | kThrift2 | kThrift3) << "nothing more to take";
  EXPECT_EQ(g.actions() & (kShedCpuSamples | kShedTensorEvents), 0u) << "every profile type stays";
  // Under 70% of the budget is not enough to leave a thrift rung: a step
  // down makes the library's walks four times as many again.
  for (int i = 0; i < 40; i++) g.Decide(t += kSec, {0, 0, 0.005});
  EXPECT_EQ(ThriftLevel(g.actions()), 3u);
  // Under a quarter of that for 30 s: one step back.
  for (int i = 0; i < 31; i++) g.Decide(t += kSec, {0, 0, 0.0015});
  EXPECT_EQ(g.actions(), thrift1 | kThrift2);
  EXPECT_EQ(g.changes().back().reason, "overhead back under budget (0.15%)");
  // Unknown (the workload idle, or gone) counts as under: no thrift is left
  // behind for the next workload.
  for (int i = 0; i < 100; i++) g.Decide(t += kSec, {0, 0, -1});
  EXPECT_EQ(g.actions(), 0u);
}

// Each ladder answers for its own limit: gpuflame's own CPU sheds what it
// costs gpuflame, the overhead what it costs the workload; a rung both hold
// (native stacks) stays while either wants it.
TEST(GuardrailsTest, CpuAndOverheadLaddersStepApart) {
  GuardrailLimits l = Limits(0.5, 0);
  l.max_overhead = 0.01;
  Guardrails g(l, {}, {});
  int64_t t = kSec;
  EXPECT_EQ(g.Decide(t, {0.9, 0, 0.02}), kShedNativeStacks);
  EXPECT_EQ(g.Decide(t += 10 * kSec, {0.9, 0, 0.02}),
            kShedNativeStacks | kShedCpuSamples | kSampleTensorEvents | kThrift1);
  // The overhead recovers, the CPU does not.
  for (int i = 0; i < 31; i++) g.Decide(t += kSec, {0.45, 0, 0.001});
  EXPECT_EQ(g.actions(), kShedNativeStacks | kShedCpuSamples);
  for (int i = 0; i < 31; i++) g.Decide(t += kSec, {0.45, 0, 0.001});
  EXPECT_EQ(g.actions(), kShedNativeStacks | kShedCpuSamples) << "the CPU ladder still holds native stacks";
}

TEST(GuardrailsTest, OverheadIsBpfTimeOverTheWorkloadsCpuTimeInTheWindow) {
  GuardrailLimits l = Limits(0, 0);
  l.max_overhead = 0.01;
  Guardrails g(l, base::ScopedFd(open("/proc/self/stat", O_RDONLY | O_CLOEXEC)),
               base::ScopedFd(open("/proc/self/statm", O_RDONLY | O_CLOEXEC)));
  int64_t t = kSec;
  g.Check(t, 1'000'000, 500'000'000);
  EXPECT_EQ(g.last_usage().overhead, -1) << "one read is no interval";
  g.Check(t += 2 * kSec, 1'000'000 + 20'000'000, 500'000'000 + 1'000'000'000);
  EXPECT_DOUBLE_EQ(g.last_usage().overhead, 0.02);
  EXPECT_EQ(g.actions(), kShedNativeStacks);
  // Under 10 ms of workload CPU in the window: too little to judge.
  Guardrails idle(l, base::ScopedFd(open("/proc/self/stat", O_RDONLY | O_CLOEXEC)),
                  base::ScopedFd(open("/proc/self/statm", O_RDONLY | O_CLOEXEC)));
  idle.Check(kSec, 0, 0);
  idle.Check(3 * kSec, 5'000'000, 5'000'000);
  EXPECT_EQ(idle.last_usage().overhead, -1);
  EXPECT_EQ(idle.actions(), 0u);
}

TEST(GuardrailsTest, TakesAStepBackOnlyAfterStayingWellUnderBudget) {
  Guardrails g(Limits(0.5, 0), {}, {});
  int64_t t = kSec;
  ASSERT_EQ(g.Decide(t, {0.9, 0}), kShedNativeStacks);
  // Just under the budget is not recovered: it would oscillate.
  for (int i = 0; i < 60; i++) EXPECT_EQ(g.Decide(t += kSec, {0.45, 0}), kShedNativeStacks);
  for (int i = 0; i < 29; i++) EXPECT_EQ(g.Decide(t += kSec, {0.1, 0}), kShedNativeStacks);
  EXPECT_EQ(g.Decide(t += 2 * kSec, {0.1, 0}), 0u);
  EXPECT_EQ(g.changes().back().reason, "CPU back under budget (0.10 cores)");
}

TEST(GuardrailsTest, MemoryFirstDropsNativeStacksThenFreezesNewStacks) {
  Guardrails g(Limits(0, 100 << 20), {}, {});
  int64_t t = kSec;
  EXPECT_EQ(g.Decide(t, {0, 50 << 20}), 0u);
  EXPECT_EQ(g.Decide(t += kSec, {0, 120 << 20}), kShedNativeStacks);
  EXPECT_EQ(g.Decide(t += kSec, {0, 130 << 20}), kShedNativeStacks | kFreezeStacks);
  EXPECT_EQ(g.changes()[0].reason, "RSS 120 MiB > 100 MiB");
  // Both ladders shed native stacks: taking the memory step back keeps it
  // while the CPU ladder still wants it.
  Guardrails h(Limits(0.5, 100 << 20), {}, {});
  t = kSec;
  EXPECT_EQ(h.Decide(t, {0.9, 120 << 20}), kShedNativeStacks);
  EXPECT_EQ(h.Decide(t += kSec, {0.9, 50 << 20}), kShedNativeStacks);
  EXPECT_EQ(h.changes().size(), 1u) << "the second ladder's identical step is not a change";
  for (int i = 0; i < 40; i++) h.Decide(t += kSec, {0.4, 50 << 20});
  EXPECT_EQ(h.actions(), kShedNativeStacks) << "memory recovered, CPU did not";
}

// A memfd holding |text|, as /proc/self/stat or statm would.
base::ScopedFd FakeProcFile(const std::string& text) {
  base::ScopedFd fd(memfd_create("fake_proc", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

TEST(GuardrailsTest, ReadsCpuTimeAndResidentMemoryFromProcSelf) {
  const long page = sysconf(_SC_PAGESIZE);
  // A command name with spaces and parentheses must not shift the fields.
  auto stat = [&](long ticks) {
    return "4242 (gpu (flame) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 " + std::to_string(ticks) + " 0 0 0 20 0";
  };
  // Fresh fds per check, as the files would be re-read from offset 0.
  Guardrails g(Limits(0.5, 1 << 20), FakeProcFile(stat(0)), FakeProcFile("1000 512 100 1 0 200 0"));
  EXPECT_EQ(g.Check(kSec), kShedNativeStacks) << "512 pages is over 1 MiB";
  EXPECT_EQ(g.last_usage().rss_bytes, 512u * page);
  EXPECT_DOUBLE_EQ(g.last_usage().cpu_cores, 0) << "no interval yet";
}

// The total for the cost report (summary.json, /metrics): user + system
// ticks over the clock rate, read whether or not a budget is set.
TEST(GuardrailsTest, CpuSecondsAreUserPlusSystemTime) {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  Guardrails g(Limits(0, 0), FakeProcFile("4242 (gpu (flame) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 300 150 0 0 20 0"),
               FakeProcFile("1000 512 100 1 0 200 0"));
  EXPECT_DOUBLE_EQ(g.CpuSeconds(), 450 / hz);
  EXPECT_DOUBLE_EQ(Guardrails(Limits(0, 0), {}, {}).CpuSeconds(), -1) << "unreadable";
}

TEST(GuardrailsTest, ReadsTheRealProcSelf) {
  Guardrails g(Limits(1000, 1ull << 40));
  g.Check(kSec);
  EXPECT_GT(g.last_usage().rss_bytes, 1u << 20);
  EXPECT_EQ(g.actions(), 0u);
  EXPECT_GE(g.CpuSeconds(), 0);
}

}  // namespace
}  // namespace gpuflame::profiler

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "app/cli.h"
#include "inspect/proc_environ.h"
#include "inspect/proc_stat.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/aggregate/window.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/pipeline/stack_ids.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/probes/probe_table.h"
#include "profiler/process/python_discovery.h"
#include "profiler/utilization/utilization.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "tests/support/records.h"

namespace gpuflame::profiler {
namespace {

TEST(ProcEnvironTest, FindsAVariableInWhateverTheProcessWrote) {
  using std::string_view_literals::operator""sv;
  const auto env = "A=1\0CUDA_INJECTION64_PATH=/x/libgpuflame_cupti.so\0CUDA_INJECTION64_PATH=/second\0"sv;
  EXPECT_EQ(inspect::FindEnvironmentValue(env, "CUDA_INJECTION64_PATH"), "/x/libgpuflame_cupti.so");
  EXPECT_EQ(inspect::FindEnvironmentValue(env, "A"), "1");
  EXPECT_FALSE(inspect::FindEnvironmentValue(env, "CUDA"));  // a prefix is not a name
  EXPECT_EQ(inspect::FindEnvironmentValue("X=no-terminator"sv, "X"), "no-terminator");
  EXPECT_FALSE(inspect::FindEnvironmentValue("X\0=\0\0\0"sv, "X"));
  EXPECT_EQ(inspect::FindEnvironmentValue("X=\0"sv, "X"), "");
  std::string huge(1 << 20, 'a');
  EXPECT_FALSE(inspect::FindEnvironmentValue(huge, "a"));
  // Our own environment, read back through /proc.
  setenv("GPUFLAME_TEST_ENV", "value=with=equals", 1);
  EXPECT_EQ(inspect::EnvironmentValue(getpid(), "GPUFLAME_TEST_ENV"), std::nullopt)
      << "environ is the exec-time environment: setenv does not change it";
  EXPECT_TRUE(inspect::EnvironmentValue(getpid(), "PATH").has_value() || !getenv("PATH"));
}

TEST(ProcStatTest, CpuTicksSurviveAnyCommandName) {
  // A process names itself: spaces and parentheses, even ") R 1 2".
  EXPECT_EQ(inspect::CpuTicksFromStat("42 (a) R 1 2 (x)) S 1 1 1 0 -1 4194560 10 0 0 0 7 5 0 0 20 0"), 12u);
  EXPECT_EQ(inspect::CpuTicksFromStat("42 (py) S 1 1 1 0 -1 0 0 0 0 0 100 23 0 0"), 123u);
  EXPECT_FALSE(inspect::CpuTicksFromStat("no parenthesis at all"));
  EXPECT_FALSE(inspect::CpuTicksFromStat("42 (short) S 1"));
  EXPECT_FALSE(inspect::CpuTicksFromStat(""));
  auto st = inspect::StateAndParentFromStat("42 (a) T 7 (x)) S 1 1");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'S');  // after the last ')': the name may fake fields
  EXPECT_EQ(st->ppid, 1);
  EXPECT_FALSE(inspect::StateAndParentFromStat("42 (a)"));
}

TEST(ProcStatTest, StartTimeIsField22) {
  // A real line (a name with ") T 1" in it): starttime follows itrealvalue.
  EXPECT_EQ(inspect::StartTicksFromStat("4929 (a) T 1 (py)) T 4909 4929 4909 34816 4929 1077936128 2190 0 0 0 4 1 0 "
                                        "0 20 0 1 0 1273535 18210816 1958 18446744073709551615"),
            1273535u);
  // Ours: started before now, in ticks of CLOCK_BOOTTIME (what the guardian compares with BPF's start_boottime).
  std::ifstream self("/proc/self/stat");
  const std::string line((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const auto start = inspect::StartTicksFromStat(line);
  ASSERT_TRUE(start) << line;
  EXPECT_LE(*start, static_cast<uint64_t>(now.tv_sec) * static_cast<uint64_t>(sysconf(_SC_CLK_TCK)) + 100);
  EXPECT_FALSE(inspect::StartTicksFromStat("42 (py) S 1 1 1 0 -1 0 0 0 0 0 100 23 0 0"));
  EXPECT_FALSE(inspect::StartTicksFromStat("no parenthesis 1 2 3"));
}

TEST(ProcStatTest, ThreadsIsField20) {
  EXPECT_EQ(inspect::ThreadsFromStat("4929 (a) T 1 (py)) T 4909 4929 4909 34816 4929 1077936128 2190 0 0 0 4 1 0 "
                                     "0 20 0 3 0 1273535 18210816 1958 18446744073709551615"),
            3u);
  std::ifstream self("/proc/self/stat");
  const std::string line((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  EXPECT_GE(inspect::ThreadsFromStat(line).value_or(0), 1u) << line;
  EXPECT_FALSE(inspect::ThreadsFromStat("42 (py) S 1 1 1 0 -1 0 0 0 0 0 100 23 0 0"));
  EXPECT_EQ(inspect::FlagsFromStat("4929 (a) T 1 (py)) T 4909 4929 4909 34816 4929 1077936128 2190"), 1077936128u);
  EXPECT_FALSE(inspect::FlagsFromStat("42 (py) S 1 1 1 0"));
}

// A call entering between its entry probe and its return probe would be
// seen never returning (bpf_probes.cc): return probes go in first, the
// sites otherwise in their order.
TEST(BpfProbesTest, ReturnProbesGoInBeforeEntryProbes) {
  using Site = BpfProbes::UprobeSite;
  const std::vector<Site> sites = {
      {.offset = 1, .program = ProbeProgram::kNcclEnter, .retprobe = false},
      {.offset = 1, .program = ProbeProgram::kNcclExit, .retprobe = true},
      {.offset = 2, .program = ProbeProgram::kNcclEnter, .retprobe = false},
      {.offset = 2, .program = ProbeProgram::kNcclExit, .retprobe = true},
  };
  std::vector<std::pair<uint64_t, bool>> order;
  for (const Site& s : BpfProbes::AttachOrder(sites)) order.emplace_back(s.offset, s.retprobe);
  EXPECT_EQ(order, (std::vector<std::pair<uint64_t, bool>>{{1, true}, {2, true}, {1, false}, {2, false}}));
}

TEST(AllocationTrackerTest, CountsAllocatedAndInUseExactly) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 100, 0);
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x2000, 50, 0);
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x3000, 7, 1);
  t.OnFree(1, GF_DOMAIN_GPU, false, 0x1000, 0);
  const auto& c = t.counters();
  EXPECT_EQ(c[0].alloc_objects, 2);
  EXPECT_EQ(c[0].alloc_bytes, 150);
  EXPECT_EQ(c[0].inuse_objects, 1);
  EXPECT_EQ(c[0].inuse_bytes, 50);
  EXPECT_EQ(c[1].inuse_bytes, 7);
  EXPECT_EQ(t.live_count(), 2u);
}

TEST(AllocationTrackerTest, ASampledAllocationCountsAsWhatItStandsForUntilItsFree) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 64 << 10, 0, /*stands_for=*/2 << 20);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x2000, 8 << 20, 0, /*stands_for=*/8 << 20);  // exact: big enough
  const auto& c = t.counters();
  EXPECT_EQ(c[0].alloc_bytes, (2 << 20) + (8 << 20));
  EXPECT_EQ(c[0].alloc_objects, 32 + 1);
  EXPECT_EQ(c[0].alloc_samples, 2);
  EXPECT_EQ(c[0].observed_bytes, (64 << 10) + (8 << 20));
  EXPECT_EQ(t.stats().sampled_allocs, 1u);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x1000, 0);
  EXPECT_EQ(c[0].inuse_bytes, 8 << 20);
  EXPECT_EQ(c[0].inuse_objects, 1);
}

TEST(AllocationTrackerTest, AFreeWhileTheProbesSampledIsOfATakenBlockOrCountedApart) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 64 << 10, 0, /*stands_for=*/4 << 20);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x1000, 0, /*maybe_unsampled=*/true);  // taken: released
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x2000, 100, /*maybe_unsampled=*/true);  // never taken
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x3000, 100, /*maybe_unsampled=*/true);
  EXPECT_EQ(t.stats().unsampled_frees, 2u);
  EXPECT_EQ(t.stats().unmatched_frees, 0u);
  // Or taken, and its record lost in a full ring (kept by BPF, applied
  // later): it pairs with its free, as an unmatched one would.
  t.OnLostAlloc(1, GF_DOMAIN_TORCH, false, 0x2000, 10, 1, 0, /*ts_ns=*/50);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.stats().unsampled_frees, 1u);
}

TEST(AllocationTrackerTest, ASampledAllocationsObjectsAreUnbiasedWhateverItsSize) {
  // 3 MiB taken for 4 MiB stands for 4/3 allocations: rounded to 1 always,
  // 10,000 of them would count 3,333 too few.
  AllocationTracker t;
  constexpr int kN = 10000;
  for (int i = 0; i < kN; i++)
    t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x100000ull * (i + 1), 3 << 20, 0, /*stands_for=*/4 << 20,
              /*ts_ns=*/1000 + i);
  EXPECT_NEAR(static_cast<double>(t.counters()[0].alloc_objects), kN * 4.0 / 3.0, kN * 4.0 / 3.0 * 0.02);
  EXPECT_EQ(t.counters()[0].alloc_bytes, int64_t{kN} * (4 << 20));
}

TEST(AllocationTrackerTest, KeysSeparateProcessesDomainsAndHandles) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 0);
  t.OnAlloc(2, GF_DOMAIN_GPU, false, 0x1000, 20, 1);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 30, 2);
  t.OnAlloc(1, GF_DOMAIN_GPU, true, 0x1000, 40, 3);
  t.OnFree(2, GF_DOMAIN_GPU, false, 0x1000, 0);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 10);
  EXPECT_EQ(t.counters()[1].inuse_bytes, 0);
  EXPECT_EQ(t.counters()[2].inuse_bytes, 30);
  EXPECT_EQ(t.counters()[3].inuse_bytes, 40);
}

TEST(AllocationTrackerTest, CountsWhatItCannotMatch) {
  AllocationTracker t;
  t.OnFree(1, GF_DOMAIN_GPU, false, 0x9999, 0);  // allocated before we attached
  EXPECT_EQ(t.stats().unmatched_frees, 1u);
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 0);
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 20, 1);  // the free was missed
  EXPECT_EQ(t.stats().replaced_live, 1u);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.counters()[1].inuse_bytes, 20);
}

// Records the ring buffer had no room for come back without their stacks,
// out of order with the rest (bpf/gpuflame_abi.h, struct gf_lost_key).
TEST(AllocationTrackerTest, ALostFreeReleasesItsAllocationWhicheverArrivesFirst) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 0, 0, /*ts=*/100);
  t.OnLostFree(1, GF_DOMAIN_GPU, false, 0x1000, 200);  // after its allocation
  t.OnLostFree(1, GF_DOMAIN_GPU, false, 0x2000, 300);  // before it: still in the ring
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x2000, 20, 0, 0, 250);
  EXPECT_EQ(t.counters()[0].alloc_bytes, 30);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.live_count(), 0u);
  EXPECT_EQ(t.stats().lost_frees, 2u);
}

TEST(AllocationTrackerTest, ALostFreeNeverFreesALaterAllocationAtTheSameAddress) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 10, 0, 0, 100);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 10, 1, 0, 300);  // reused: its free was lost
  t.OnLostFree(1, GF_DOMAIN_TORCH, false, 0x1000, 200);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.counters()[1].inuse_bytes, 10);
}

TEST(AllocationTrackerTest, ALostAllocationIsInUseUnderItsStackUntilItsFree) {
  AllocationTracker t;
  const StackId lost = 3;
  t.AddLostAllocated(lost, 3, 60);  // what the loss counters said
  t.OnLostAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 1, lost, 100);
  t.OnFree(1, GF_DOMAIN_GPU, false, 0x1000, 150);
  t.OnLostAlloc(1, GF_DOMAIN_GPU, false, 0x2000, 20, 1, lost, 200);
  // Its free came through first (a free of nothing then): they pair up.
  t.OnFree(1, GF_DOMAIN_GPU, false, 0x3000, 350);
  EXPECT_EQ(t.stats().unmatched_frees, 1u);
  t.OnLostAlloc(1, GF_DOMAIN_GPU, false, 0x3000, 30, 1, lost, 300);
  EXPECT_EQ(t.stats().unmatched_frees, 0u);
  // Lost with its free, the free taken out of the map first.
  t.OnLostFree(1, GF_DOMAIN_GPU, false, 0x4000, 500);
  t.OnLostAlloc(1, GF_DOMAIN_GPU, false, 0x4000, 40, 1, lost, 400);
  EXPECT_EQ(t.counters()[lost].alloc_objects, 3);
  EXPECT_EQ(t.counters()[lost].alloc_bytes, 60);
  EXPECT_EQ(t.counters()[lost].inuse_objects, 1);
  EXPECT_EQ(t.counters()[lost].inuse_bytes, 20);
  EXPECT_EQ(t.live_count(), 1u);
}

TEST(AllocationTrackerTest, ALostSampledAllocationIsInUseAsTheObjectsItStoodFor) {
  // A 64 KiB block taken for 4 MiB stands for 64 allocations: lost in the
  // ring, BPF keeps that count (note_loss), and its free takes all of them.
  AllocationTracker t;
  const StackId lost = 2;
  t.OnLostAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 4 << 20, 64, lost, 100);
  EXPECT_EQ(t.counters()[lost].inuse_objects, 64);
  EXPECT_EQ(t.counters()[lost].inuse_bytes, 4 << 20);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x1000, 200, /*maybe_unsampled=*/true);
  EXPECT_EQ(t.counters()[lost].inuse_objects, 0);
  EXPECT_EQ(t.counters()[lost].inuse_bytes, 0);
}

TEST(AllocationTrackerTest, ASampledRunsLostFreesOfBlocksNeverTakenPushOutNoOtherLostFree) {
  AllocationTracker t;
  // An exact lost free whose allocation is still in the ring...
  t.OnLostFree(1, GF_DOMAIN_GPU, false, 0x1000, 100);
  // ...then a flood of lost frees of tensor blocks the probes never took,
  // far more than a pending map holds.
  for (uint64_t i = 0; i < 200'000; i++)
    t.OnLostFree(1, GF_DOMAIN_TORCH, false, 0x100000 + 512 * i, 110 + i, /*maybe_unsampled=*/true);
  EXPECT_EQ(t.stats().lost_frees_forgotten, 0u);
  // The allocation arrives: its free is still known, so it is not in use.
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 0, 0, /*ts_ns=*/50);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.live_count(), 0u);
  // A flood of exact ones is counted as it is forgotten: their allocations,
  // should they come, would stay in use.
  for (uint64_t i = 0; i < 70'000; i++) t.OnLostFree(2, GF_DOMAIN_GPU, false, 0x100000 + 512 * i, 1000 + i);
  EXPECT_GT(t.stats().lost_frees_forgotten, 0u);
}

TEST(AllocationTrackerTest, FrozenAndExitedProcessesKeepTheirLiveSet) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 10, 0);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x2000, 7, 0);
  t.FreezeProcess(1, 100);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x1000, 100);  // interpreter teardown
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x2000, 99);   // before it, arrived late: applied
  EXPECT_EQ(t.counters()[0].inuse_bytes, 10);
  EXPECT_EQ(t.stats().shutdown_frees, 1u);
  EXPECT_EQ(t.stats().unmatched_frees, 0u);
  t.OnProcessExit(1);
  EXPECT_EQ(t.live_count(), 0u);
  EXPECT_EQ(t.counters()[0].inuse_bytes, 10);
  // A new process reusing the pid starts unfrozen.
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0x1000, 5, 1);
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0x1000, 0);
  EXPECT_EQ(t.counters()[1].inuse_bytes, 0);
}

TEST(AllocationTrackerTest, ForgottenStacksStartFromZero) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x1000, 10, 0);
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0x2000, 20, 1);
  t.OnProcessExit(1);
  t.ForgetStacks({0, 7});  // 7: a stack the tracker never saw
  EXPECT_EQ(t.counters()[0].inuse_bytes, 0);
  EXPECT_EQ(t.counters()[0].alloc_bytes, 0);
  EXPECT_EQ(t.counters()[1].alloc_bytes, 20);  // not forgotten
}

TEST(AllocationTrackerTest, PeakIsTheLiveSetAtTheHighWaterMarkPerProcessAndDomain) {
  AllocationTracker t;
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0xa, 100, 0, 0, 10);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0xb, 50, 1, 0, 20);  // 150
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0xa, 30);              // 50
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0xc, 120, 2, 0, 40);  // 170: the peak
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0xc, 50);
  t.OnAlloc(1, GF_DOMAIN_TORCH, false, 0xd, 10, 0, 0, 60);   // 60
  t.OnAlloc(2, GF_DOMAIN_TORCH, false, 0xa, 1000, 3, 0, 70);  // another process
  t.OnAlloc(1, GF_DOMAIN_GPU, false, 0xa, 500, 4, 0, 80);     // another domain
  const auto c = t.CountersWithPeaks(PeakScope::kAllTime);
  EXPECT_EQ(c[0].peak_bytes, 0);
  EXPECT_EQ(c[1].peak_bytes, 50);
  EXPECT_EQ(c[2].peak_bytes, 120);
  EXPECT_EQ(c[2].peak_objects, 1);
  EXPECT_EQ(c[3].peak_bytes, 1000);
  EXPECT_EQ(c[4].peak_bytes, 500);
  EXPECT_EQ(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kAllTime).bytes, 170);
  EXPECT_EQ(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kAllTime).ts_ns, 40u);
  EXPECT_EQ(t.counters()[2].peak_bytes, 0) << "counters() itself carries no peaks";
  // A window starts from the live set at its start: {0: 10, 1: 50}.
  t.StartPeakWindow();
  t.OnFree(1, GF_DOMAIN_TORCH, false, 0xb, 90);
  const auto w = t.CountersWithPeaks(PeakScope::kWindow);
  EXPECT_EQ(w[0].peak_bytes, 10);
  EXPECT_EQ(w[1].peak_bytes, 50);
  EXPECT_EQ(w[2].peak_bytes, 0);
  EXPECT_EQ(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kWindow).bytes, 60);
  EXPECT_FALSE(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kWindow).all_time_in_window);
  // The before-attach marker's in use counts toward the peak too.
  t.SetInUse(1, GF_DOMAIN_TORCH, 5, 0, 300, 100);
  EXPECT_EQ(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kWindow).bytes, 310);
  EXPECT_TRUE(t.Peak(1, GF_DOMAIN_TORCH, PeakScope::kWindow).all_time_in_window);
  EXPECT_EQ(t.CountersWithPeaks(PeakScope::kAllTime)[5].peak_bytes, 300);
}

// Against a brute-force copy of every stack at every new maximum, over
// random allocations, frees and window starts in two processes and domains.
TEST(AllocationTrackerTest, PeaksMatchAFullSnapshotAtEveryMaximum) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; trial++) {
    AllocationTracker t;
    constexpr int kStacks = 12;  // stack s belongs to pid 1 + s % 2, domain s / 2 % 2
    auto scope_of = [](int s) { return (s % 2) * 2 + s / 2 % 2; };
    std::vector<int64_t> now(kStacks), all(kStacks), win(kStacks);
    int64_t total[4] = {}, peak[4] = {}, win_peak[4] = {};
    std::map<uint64_t, std::pair<int, int64_t>> live;  // addr -> stack, bytes
    for (int step = 0; step < 400; step++) {
      const int op = static_cast<int>(rng() % 10);
      if (op == 0) {
        t.StartPeakWindow();
        for (int k = 0; k < 4; k++) win_peak[k] = total[k];
        win = now;
        continue;
      }
      int stack = 0;
      if (op < 4 && !live.empty()) {
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        stack = it->second.first;
        t.OnFree(1 + stack % 2, stack / 2 % 2 ? GF_DOMAIN_TORCH : GF_DOMAIN_GPU, false, it->first, step);
        now[stack] -= it->second.second;
        total[scope_of(stack)] -= it->second.second;
        live.erase(it);
      } else {
        stack = static_cast<int>(rng() % kStacks);
        const int64_t bytes = 1 + rng() % 1000;
        const uint64_t addr = 0x1000 + static_cast<uint64_t>(step) * 16;
        t.OnAlloc(1 + stack % 2, stack / 2 % 2 ? GF_DOMAIN_TORCH : GF_DOMAIN_GPU, false, addr, bytes, stack, 0, step);
        live[addr] = {stack, bytes};
        now[stack] += bytes;
        total[scope_of(stack)] += bytes;
      }
      const int k = scope_of(stack);
      if (total[k] > win_peak[k]) {
        win_peak[k] = total[k];
        for (int s = 0; s < kStacks; s++)
          if (scope_of(s) == k) win[s] = now[s];
      }
      if (total[k] > peak[k]) {
        peak[k] = total[k];
        for (int s = 0; s < kStacks; s++)
          if (scope_of(s) == k) all[s] = now[s];
      }
    }
    const auto a = t.CountersWithPeaks(PeakScope::kAllTime);
    const auto w = t.CountersWithPeaks(PeakScope::kWindow);
    for (int s = 0; s < kStacks; s++) {
      const int64_t got_all = s < static_cast<int>(a.size()) ? a[s].peak_bytes : 0;
      const int64_t got_win = s < static_cast<int>(w.size()) ? w[s].peak_bytes : 0;
      ASSERT_EQ(got_all, all[s]) << "trial " << trial << " stack " << s;
      ASSERT_EQ(got_win, win[s]) << "trial " << trial << " stack " << s;
    }
    for (int k = 0; k < 4; k++) {
      const PeakSummary p = t.Peak(1 + k / 2, k % 2 ? GF_DOMAIN_TORCH : GF_DOMAIN_GPU, PeakScope::kAllTime);
      ASSERT_EQ(p.bytes, peak[k]) << "trial " << trial << " scope " << k;
    }
  }
}

TEST(CliTest, ParsesRecord) {
  auto c = ParseCommandLine({"record", "-o", "out", "--duration", "2.5", "--", "python3", "-c", "x"});
  ASSERT_TRUE(c.ok()) << c.status();
  auto& r = std::get<RecordOptions>(*c);
  EXPECT_EQ(r.output_dir, "out");
  EXPECT_DOUBLE_EQ(*r.duration_s, 2.5);
  EXPECT_EQ(r.command, (std::vector<std::string>{"python3", "-c", "x"}));
  auto p = ParseCommandLine({"record", "-o", "out", "-p", "12", "--pid", "34"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::get<RecordOptions>(*p).pids, (std::vector<pid_t>{12, 34}));
}

TEST(CliTest, OneClearMessagePerMistake) {
  auto msg = [](std::vector<std::string> a) {
    auto c = ParseCommandLine(a);
    return c.ok() ? std::string("ok") : std::string(c.status().message());
  };
  EXPECT_NE(msg({}).find("missing command"), std::string::npos);
  EXPECT_NE(msg({"recrod"}).find("unknown command 'recrod'"), std::string::npos);
  EXPECT_NE(msg({"record"}).find("record needs -o DIR"), std::string::npos);
  EXPECT_NE(msg({"record", "-o"}).find("-o needs a directory"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "-d", "soon"}).find("positive number of seconds"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "-p", "-5"}).find("--pid wants a process ID"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "--"}).find("nothing to run"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "-p", "1", "--", "ls"}).find("not both"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "--frobnicate"}).find("unknown option"), std::string::npos);
  EXPECT_NE(msg({"record", "-o", "x", "--native-stacks", "some"}).find("off, gpu or all"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<HelpRequest>(*ParseCommandLine({"--help"})));
}

TEST(PythonDiscoveryTest, VersionFromFileNames) {
  auto v = VersionFromName("libpython3.12.so.1.0");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->minor, 12);
  EXPECT_EQ(VersionFromName("python3.10")->minor, 10);
  EXPECT_FALSE(VersionFromName("python").has_value());
  EXPECT_FALSE(VersionFromName("libpython2.7.so").has_value());
  EXPECT_FALSE(VersionFromName("pythonista").has_value());
}

TEST(PythonDiscoveryTest, BpfLayoutFollowsTheVersionTable) {
  auto l312 = inspect::LayoutFor({3, 12, 1});
  gf_py_proc p = inspect::MakePyProc(*l312, 0x7f0000001000);
  EXPECT_EQ(p.runtime_addr, 0x7f0000001000u);
  EXPECT_EQ(p.tss_off, 1544u);
  EXPECT_EQ(p.frame_owner, 70);
  EXPECT_TRUE(p.uses_cframe);
  EXPECT_FALSE(p.read_self_type);
  gf_py_proc p310 = inspect::MakePyProc(*inspect::LayoutFor({3, 10, 13}), 1);
  EXPECT_TRUE(p310.read_self_type);
  EXPECT_FALSE(p310.instr_is_pointer);
  gf_py_proc p313 = inspect::MakePyProc(*inspect::LayoutFor({3, 13, 0}), 1);
  EXPECT_FALSE(p313.uses_cframe);
  EXPECT_EQ(p313.tstate_frame, 72);
}

TEST(ProbeTableTest, EveryApiHasALeafName) {
  for (const UprobeSpec& s : UprobeSpecs()) {
    if (s.api == GF_API_NONE) continue;
    EXPECT_NE(ApiName(s.api), "[unknown api]") << s.symbol;
  }
  EXPECT_EQ(ApiName(GF_API_CU_MEM_ALLOC), "cuMemAlloc_v2");
}

// Records built as BPF would send them, fed to the event loop without a
// registry: the decode, interning and accounting path on its own.
class EventProcessorTest : public ::testing::Test {
 protected:
  std::vector<uint8_t> Record(uint8_t kind, uint8_t domain, uint16_t api, uint64_t addr,
                              uint64_t size, std::vector<uint64_t> native = {}) {
    gf_event ev = testing::Header(kind, domain, api, 4242);
    ev.ts_ns = 0;
    ev.addr = addr;
    ev.size = size;
    ev.native_count = static_cast<uint16_t>(native.size());
    return testing::MakeRecord(ev, native.data(), native.size() * 8);
  }
  symbolizer::ElfCache elves_;
  symbolizer::NativeSymbolizer native_{elves_};
  StackResolver resolver_{nullptr, native_, {}};
  EventProcessor events_{nullptr, resolver_};
};

TEST_F(EventProcessorTest, LibraryCostSumsCumulativeReportsAndCapsWhatAProcessClaims) {
  auto report = [&](uint32_t pid, uint64_t ts, uint64_t calls, uint64_t hook_ns, uint64_t callback_ns,
                    uint64_t thread_ns) {
    gf_event ev = testing::Header(GF_EV_LIB_COST, GF_DOMAIN_NONE, 0, pid);
    ev.ts_ns = ts;
    ev.addr = calls;
    ev.size = hook_ns;
    ev.arg0 = callback_ns;
    ev.arg1 = thread_ns;
    ev.arg2 = 7;
    events_.OnRecord(testing::MakeRecord(ev));
  };
  constexpr uint64_t kS = 1'000'000'000;
  report(1, 1 * kS, 100, 10'000, 0, 0);      // first: taken whole
  report(1, 2 * kS, 300, 50'000, 0, 1'000);  // +40 us hook, +1 us threads
  report(2, 2 * kS, 10, 2'000, 500, 0);      // another process
  report(1, 3 * kS, 50, 5'000, 0, 1'000);    // went back (exec): restarts from there
  EXPECT_EQ(events_.library_cost().processes, 2u);
  EXPECT_EQ(events_.library_cost().hook_calls, 300u + 10u + 50u);
  EXPECT_EQ(events_.library_cost().hook_ns, 50'000u + 2'000u + 5'000u);
  EXPECT_EQ(events_.library_cost().ns(), 57'000u + 500u + 1'000u) << "hook, callbacks, threads";
  // A process claiming more than 256 threads' worth of a second in a second
  // is held to that: it cannot push the node's agent over its budget.
  report(2, 3 * kS, 20, 2'000 + 1'000'000 * kS, 500, 0);
  EXPECT_EQ(events_.library_cost().hook_ns, 57'000u + 256 * kS);
}

TEST_F(EventProcessorTest, RingLossesAreChargedToTheLostFrameOnceEach) {
  events_.SetCpuSampling(10'000'000, false);
  auto loss = [](uint32_t pid, uint8_t domain, uint8_t kind, uint64_t records, uint64_t bytes) {
    gf_loss_key k{};
    k.pid = pid;
    k.domain = domain;
    k.kind = kind;
    return std::pair{k, gf_loss{records, bytes, kind == GF_EV_ALLOC ? records : 0}};
  };
  std::vector<std::pair<gf_loss_key, gf_loss>> totals = {loss(7, GF_DOMAIN_GPU, GF_EV_ALLOC, 3, 3000),
                                                         loss(7, GF_DOMAIN_CPU, GF_EV_CPU_SAMPLE, 5, 0),
                                                         loss(7, GF_DOMAIN_GPU, GF_EV_FREE, 2, 0)};
  events_.OnLosses(totals);
  totals[0].second = {4, 3500, 4};  // BPF's totals are cumulative: only the growth counts
  events_.OnLosses(totals);
  // Two of the lost allocations kept by BPF, one freed by a kept free.
  std::vector<std::pair<gf_lost_key, gf_lost_event>> kept;
  auto lost = [](uint8_t kind, uint64_t addr, uint64_t ts, uint64_t size) {
    gf_lost_key k{};
    k.addr = addr;
    k.ts_ns = ts;
    k.pid = 7;
    k.domain = GF_DOMAIN_GPU;
    k.kind = kind;
    return std::pair{k, gf_lost_event{ts, size, 1}};
  };
  kept.push_back(lost(GF_EV_FREE, 0x1000, 30, 0));  // taken out of the map before its allocation
  kept.push_back(lost(GF_EV_ALLOC, 0x1000, 10, 1000));
  kept.push_back(lost(GF_EV_ALLOC, 0x2000, 20, 500));
  events_.OnLostEvents(kept);

  ASSERT_EQ(events_.stacks().size(), 2u);  // [lost] for device memory and for CPU time
  const ProcessLoss& l = events_.losses().at(7);
  EXPECT_EQ(l.records, 11u);
  EXPECT_EQ(l.allocs, 4u);
  EXPECT_EQ(l.alloc_bytes, 3500u);
  EXPECT_EQ(l.cpu_samples, 5u);
  for (StackId id = 0; id < events_.stacks().size(); id++) {
    const StackInfo& s = events_.stacks().Get(id);
    ASSERT_EQ(s.frames.size(), 1u);
    EXPECT_EQ(events_.frames().Get(s.frames[0]).name, kLostFrame);
    if (s.domain == GF_DOMAIN_GPU) {
      EXPECT_EQ(events_.tracker().counters()[id].alloc_bytes, 3500);
      EXPECT_EQ(events_.tracker().counters()[id].inuse_bytes, 500);
    } else {
      EXPECT_EQ(events_.cpu().totals().at(TimeKey{id, 0}).nanos, 5 * 10'000'000);
    }
  }
}

TEST_F(EventProcessorTest, LostSampledAllocationsCountTheObjectsTheyStoodFor) {
  // Two probe-sampled 64 KiB blocks lost in the ring: 8 MiB and, by BPF's
  // draw (note_loss), 64 allocations each, allocated and in use alike.
  gf_loss_key k{};
  k.pid = 7;
  k.domain = GF_DOMAIN_TORCH;
  k.kind = GF_EV_ALLOC;
  const std::vector<std::pair<gf_loss_key, gf_loss>> totals = {{k, gf_loss{2, 8 << 20, 128}}};
  events_.OnLosses(totals);
  std::vector<std::pair<gf_lost_key, gf_lost_event>> kept;
  for (uint64_t i = 0; i < 2; i++) {
    gf_lost_key lk{};
    lk.addr = 0x1000 * (i + 1);
    lk.ts_ns = 10 + i;
    lk.pid = 7;
    lk.domain = GF_DOMAIN_TORCH;
    lk.kind = GF_EV_ALLOC;
    kept.push_back({lk, gf_lost_event{10 + i, 4 << 20, 64}});
  }
  events_.OnLostEvents(kept);
  ASSERT_EQ(events_.stacks().size(), 1u);
  const StackCounters& c = events_.tracker().counters()[0];
  EXPECT_EQ(c.alloc_objects, 128);
  EXPECT_EQ(c.alloc_bytes, 8 << 20);
  EXPECT_EQ(c.inuse_objects, 128);
  EXPECT_EQ(c.inuse_bytes, 8 << 20);
}

// A synchronise call from the probes (bpf/cuda_sync.bpf.h): entered at
// arg0, returned at ts_ns, with its stack; the wait goes to utilization.
TEST_F(EventProcessorTest, ProbeSyncCallsAreDecodedIntoWaitsWithTheirStack) {
  utilization::Utilization u{utilization::UtilizationOptions{}};
  auto sync = [&](uint16_t api, uint64_t start, uint64_t end) {
    gf_event ev = testing::Header(GF_EV_CUDA_SYNC, GF_DOMAIN_SYNC, api, 4242);
    ev.ts_ns = end;
    ev.arg0 = start;
    std::vector<uint64_t> native = {0x10, 0x20};
    ev.native_count = 2;
    return testing::MakeRecord(ev, native.data(), 16);
  };
  events_.OnRecord(sync(GF_API_CUDA_STREAM_SYNC, 1000, 5000));  // no utilization: counted, unused
  EXPECT_EQ(events_.stats().sync_calls_unused, 1u);
  events_.SetUtilization(&u);
  events_.OnRecord(sync(GF_API_CUDA_STREAM_SYNC, 1000, 5000));
  events_.OnRecord(sync(GF_API_CU_CTX_SYNC, 6000, 7000));
  events_.OnRecord(sync(GF_API_CUDA_MALLOC, 6000, 7000));  // not a synchronise call
  events_.OnRecord(sync(GF_API_CU_EVENT_SYNC, 9000, 8000));  // ends before it starts
  events_.SetUtilization(nullptr);
  EXPECT_EQ(events_.stats().malformed, 2u);
  EXPECT_EQ(events_.stats().sync_calls, 3u);
  u.Finish();
  const utilization::SyncStats& s = u.syncs().at(4242);
  EXPECT_EQ(s.calls, 2u);
  EXPECT_EQ(s.stream_ns, 4000u);
  EXPECT_EQ(s.context_ns, 1000u);
  EXPECT_EQ(s.not_aligned, 2u);  // no clock pair of the process
  ASSERT_EQ(u.sync_stacks().size(), 2u);
  for (const auto& [key, ns] : u.sync_stacks()) {
    const StackInfo& stack = events_.stacks().Get(key.second);
    const std::string leaf = events_.frames().Get(stack.frames.back()).name;
    EXPECT_EQ(leaf, ns == 4000u ? "cudaStreamSynchronize" : "cuCtxSynchronize");
  }
}

TEST_F(EventProcessorTest, InternsStacksAndAccounts) {
  auto a = Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x1000, 4096, {0x10, 0x20});
  events_.OnRecord(a);
  auto b = Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x2000, 4096, {0x10, 0x20});
  events_.OnRecord(b);
  EXPECT_EQ(events_.stacks().size(), 1u);  // same raw stack
  auto c = Record(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 0x1000, 512);
  events_.OnRecord(c);
  EXPECT_EQ(events_.stacks().size(), 2u);
  events_.OnRecord(Record(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, 0x1000, 0));
  EXPECT_EQ(events_.tracker().counters()[0].inuse_bytes, 4096);
  EXPECT_EQ(events_.tracker().counters()[0].alloc_bytes, 8192);
  // The leaf is the API, whatever else could be resolved.
  const StackInfo& s = events_.stacks().Get(1);
  EXPECT_EQ(events_.frames().Get(s.frames.back()).name, "c10::cuda::CUDACachingAllocator::malloc");
}

TEST_F(EventProcessorTest, RetiredProcessesGiveBackTheirStacks) {
  // Many distinct stacks of a process that then exits (an agent's view of a
  // churning node): retiring frees them and a reused pid starts afresh.
  for (uint64_t i = 0; i < 200; i++)
    events_.OnRecord(Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x1000 + i, 4096,
                            {0x10, 0x20 + i, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80}));
  ASSERT_EQ(events_.stacks().size(), 200u);
  size_t before = events_.stacks().MemoryUsage();
  events_.OnRecord(Record(GF_EV_EXIT, GF_DOMAIN_NONE, 0, 0, 0));
  const pid_t pid = 4242;
  std::vector<StackId> retired = events_.RetireProcesses({&pid, 1});
  EXPECT_EQ(retired.size(), 200u);
  size_t after = events_.stacks().MemoryUsage();
  EXPECT_LT(after * 2, before) << before << " -> " << after;  // what stays: empty slots
  EXPECT_TRUE(events_.stacks().Get(7).frames.empty());
  EXPECT_EQ(events_.tracker().counters()[7].alloc_bytes, 0);
  // Retiring again is nothing.
  EXPECT_TRUE(events_.RetireProcesses({&pid, 1}).empty());
  // A new process with that pid: the same raw stack is a new stack, in a
  // slot the old ones left, counted from zero; no slot is added.
  for (uint64_t i = 0; i < 200; i++)
    events_.OnRecord(Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x9000 + i, 1000,
                            {0x10, 0x20 + i, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80}));
  EXPECT_EQ(events_.stacks().size(), 200u);
  int64_t allocated = 0;
  for (StackId id = 0; id < 200; id++) {
    EXPECT_FALSE(events_.stacks().Get(id).frames.empty()) << id;
    allocated += events_.tracker().counters()[id].alloc_bytes;
  }
  EXPECT_EQ(allocated, 200 * 1000);
}

TEST_F(EventProcessorTest, AWindowOfAReusedStackIdCountsOnlyItsNewStack) {
  WindowAccumulator window;
  events_.OnRecord(Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x1000, 4096, {0x10}));
  EXPECT_EQ(window.Close(events_.tracker().counters())[0].alloc_bytes, 4096);
  events_.OnRecord(Record(GF_EV_EXIT, GF_DOMAIN_NONE, 0, 0, 0));
  const pid_t pid = 4242;
  window.Forget(events_.RetireProcesses({&pid, 1}));
  events_.OnRecord(Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x2000, 100, {0x99}));
  ASSERT_EQ(events_.stacks().size(), 1u);  // the same id, another stack
  std::vector<StackCounters> w = window.Close(events_.tracker().counters());
  EXPECT_EQ(w[0].alloc_bytes, 100);
  EXPECT_EQ(w[0].inuse_bytes, 100);
}

TEST_F(EventProcessorTest, RejectsMalformedRecords) {
  std::vector<uint8_t> tiny(10);
  events_.OnRecord(tiny);
  auto bad = Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 1, 1, {0x10});
  bad.pop_back();  // payload no longer matches native_count
  events_.OnRecord(bad);
  auto lying = Record(GF_EV_ALLOC, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 1, 1);
  reinterpret_cast<gf_event*>(lying.data())->py_count = 1000;
  events_.OnRecord(lying);
  EXPECT_EQ(events_.stats().malformed, 3u);
  EXPECT_EQ(events_.tracker().stats().allocs, 0u);
}

TEST(KernelStackIdsTest, KeepsTheFirstCopyPerProcessUntilItsExit) {
  KernelStackIds ids;
  const gf_stack_id a{1, 2}, b{3, 4};
  const std::vector<uint8_t> frames(48, 7), other(24, 9);
  ids.Remember(10, a, frames);
  ids.Remember(10, a, other);  // two CPUs sent it: the first copy stays
  ids.Remember(11, a, other);  // another process's ID space
  ids.Remember(10, b, other);
  ASSERT_TRUE(ids.Find(10, a));
  EXPECT_EQ(ids.Find(10, a)->size(), 48u);
  EXPECT_EQ(ids.Find(11, a)->size(), 24u);
  EXPECT_FALSE(ids.Find(12, a));
  EXPECT_EQ(ids.stacks(), 3u);
  EXPECT_EQ(ids.bytes(), 96u);
  ids.ForgetProcess(10);
  EXPECT_FALSE(ids.Find(10, a));
  EXPECT_FALSE(ids.Find(10, b));
  EXPECT_TRUE(ids.Find(11, a));
  EXPECT_EQ(ids.bytes(), 24u);
}

TEST_F(EventProcessorTest, AStackSentAsItsIdIsTheStackItsFramesMade) {
  const gf_event alloc = testing::Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 4242);
  auto at = [&](uint64_t addr, uint64_t size) {
    gf_event ev = alloc;
    ev.addr = addr;
    ev.size = size;
    return ev;
  };
  const gf_stack_id id{0x1234, 0x5678};
  events_.OnRecord(testing::NewStackRecord(at(0x1000, 4096), 12, 5, id));
  events_.OnRecord(testing::StackIdRecord(at(0x2000, 100), 12, id));
  events_.OnRecord(testing::PythonRecord(at(0x3000, 10), 12, 5));  // the same frames inline (interning off)
  ASSERT_EQ(events_.stacks().size(), 1u);
  EXPECT_EQ(events_.tracker().counters()[0].alloc_bytes, 4206);
  EXPECT_EQ(events_.stats().stack_id_records, 1u);
  EXPECT_EQ(events_.stats().stack_id_unknown, 0u);
  EXPECT_EQ(events_.stats().malformed, 0u);
}

TEST_F(EventProcessorTest, AStackIdWhoseFramesWereNotKeptIsChargedToAMarkerAndCounted) {
  gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 4242);
  ev.addr = 0x1000;
  ev.size = 4096;
  const gf_stack_id id{1, 1};
  events_.OnRecord(testing::StackIdRecord(ev, 3, id));
  // Its frames came, then the process exited and the pid, reused, names the ID.
  events_.OnRecord(testing::NewStackRecord(ev, 3, 9, gf_stack_id{2, 2}));
  events_.OnRecord(Record(GF_EV_EXIT, GF_DOMAIN_NONE, 0, 0, 0));
  ev.addr = 0x2000;
  events_.OnRecord(testing::StackIdRecord(ev, 3, gf_stack_id{2, 2}));
  // The frame count the ID was sent with must match what it names.
  events_.OnRecord(testing::NewStackRecord(ev, 4, 9, gf_stack_id{3, 3}));
  ev.addr = 0x3000;
  events_.OnRecord(testing::StackIdRecord(ev, 5, gf_stack_id{3, 3}));
  EXPECT_EQ(events_.stats().stack_id_unknown, 3u);
  EXPECT_EQ(events_.stats().malformed, 0u);
  const StackId marker = 0;
  EXPECT_EQ(events_.frames().Get(events_.stacks().Get(marker).frames.front()).name, kStackUnknownFrame);
  EXPECT_EQ(events_.tracker().counters()[marker].alloc_objects, 3);
}

TEST_F(EventProcessorTest, RejectsMalformedStackIdRecords) {
  gf_event ev = testing::Header(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 4242);
  const gf_stack_id id{1, 2};
  auto both = testing::NewStackRecord(ev, 2, 1, id);
  reinterpret_cast<gf_event*>(both.data())->flags |= GF_EVF_STACK_ID;
  events_.OnRecord(both);
  auto short_id = testing::StackIdRecord(ev, 2, id);
  short_id.pop_back();
  events_.OnRecord(short_id);
  auto no_frames = testing::StackIdRecord(ev, 0, id);
  events_.OnRecord(no_frames);
  auto with_native = testing::NewStackRecord(ev, 2, 1, id);
  reinterpret_cast<gf_event*>(with_native.data())->native_count = 1;
  events_.OnRecord(with_native);
  auto too_many = testing::NewStackRecord(ev, 2, 1, id);
  reinterpret_cast<gf_event*>(too_many.data())->py_count = GF_MAX_PY_FRAMES + 1;
  events_.OnRecord(too_many);
  EXPECT_EQ(events_.stats().malformed, 5u);
  EXPECT_EQ(events_.tracker().stats().allocs, 0u);
  // None of them taught the processor an ID.
  events_.OnRecord(testing::StackIdRecord(ev, 2, id));
  EXPECT_EQ(events_.stats().stack_id_unknown, 1u);
}

TEST_F(EventProcessorTest, AProbeSampledAllocationStandsForTheIntervalAndItsProcesssFreesStayApart) {
  auto sampled = [](std::vector<uint8_t> r) {
    reinterpret_cast<gf_event*>(r.data())->flags |= GF_EVF_SAMPLED;
    return r;
  };
  events_.OnRecord(sampled(Record(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0x100, 64 << 10)));
  events_.OnRecord(sampled(Record(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0x200, 8 << 20)));
  int64_t bytes = 0;
  for (const StackCounters& c : events_.tracker().counters()) bytes += c.alloc_bytes;
  EXPECT_EQ(bytes, int64_t{GF_PROBE_TENSOR_SAMPLE_BYTES} + (8 << 20)) << "the interval; a larger one, itself";
  // Frees of blocks never taken: while sampling (flagged), and after the
  // guardrails stepped back (unflagged), neither is "allocated before attach".
  events_.OnRecord(sampled(Record(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0x300, 0)));
  events_.OnRecord(Record(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0x400, 0));
  events_.OnRecord(Record(GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0x100, 0));
  EXPECT_EQ(events_.tracker().stats().unsampled_frees, 2u);
  EXPECT_EQ(events_.tracker().stats().unmatched_frees, 0u);
  // A device-level free of nothing is still unmatched.
  events_.OnRecord(Record(GF_EV_FREE, GF_DOMAIN_GPU, GF_API_CUDA_FREE, 0x500, 0));
  EXPECT_EQ(events_.tracker().stats().unmatched_frees, 1u);
}

// On the timeline, a sampled block's allocation and free say its own size;
// the in-use counter, the estimate (the interval while it lives).
TEST_F(EventProcessorTest, ATimelinesSampledBlockSaysItsOwnSizeBothWays) {
  timeline::Timeline tl(events_.stacks(), events_.frames(), {});
  events_.SetTimeline(&tl);
  auto record = [&](uint8_t kind, uint64_t ts, uint64_t addr, uint64_t size) {
    auto r = Record(kind, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, addr, size);
    auto* ev = reinterpret_cast<gf_event*>(r.data());
    ev->flags |= GF_EVF_SAMPLED;
    ev->ts_ns = ts;
    events_.OnRecord(r);
  };
  record(GF_EV_ALLOC, 10, 0x100, 64 << 10);
  record(GF_EV_FREE, 20, 0x200, 64 << 10);  // a block never taken: no slice
  record(GF_EV_FREE, 30, 0x100, 64 << 10);
  events_.SetTimeline(nullptr);
  std::vector<std::pair<int64_t, int64_t>> memory;  // bytes, in use after
  for (const timeline::Event& e : tl.events())
    if (e.type == timeline::EventType::kMemory) memory.emplace_back(e.bytes, e.in_use);
  EXPECT_EQ(memory, (std::vector<std::pair<int64_t, int64_t>>{{64 << 10, int64_t{GF_PROBE_TENSOR_SAMPLE_BYTES}},
                                                              {-(64 << 10), 0}}));
}

TEST_F(EventProcessorTest, InProcessTensorEventsAccountLikeProbeEvents) {
  // Probe events before the hook went live count; the hook's own count
  // from then on, and a probe event after that would be counted twice.
  auto before = Record(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 0x100, 512);
  reinterpret_cast<gf_event*>(before.data())->ts_ns = 5;
  events_.OnRecord(before);
  events_.OnRecord(testing::TensorBatch(4242)
                       .Hook(10)
                       .Stack(0xabc1, 3, 1)
                       .Alloc(11, 0x1000, 2048, 0xabc1)
                       .Alloc(12, 0x2000, 1024, 0xabc1)
                       .Free(13, 0x1000)
                       .Build());
  auto after = Record(GF_EV_ALLOC, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 0x3000, 512);
  reinterpret_cast<gf_event*>(after.data())->ts_ns = 20;
  events_.OnRecord(after);
  EXPECT_EQ(events_.stats().malformed, 0u);
  EXPECT_EQ(events_.stats().inprocess_events, 3u);
  EXPECT_EQ(events_.stats().inprocess_stacks, 1u);
  EXPECT_EQ(events_.stats().bpf_tensor_events_superseded, 1u);
  ASSERT_EQ(events_.stacks().size(), 2u);  // the probe's stack and the library's
  const StackCounters& c = events_.tracker().counters()[1];
  EXPECT_EQ(c.alloc_objects, 2);
  EXPECT_EQ(c.alloc_bytes, 3072);
  EXPECT_EQ(c.inuse_bytes, 1024);
  EXPECT_EQ(events_.tracker().stats().unmatched_frees, 0u);
  // The library's view of its pid is its namespace's: the probe's host pid wins.
  EXPECT_EQ(events_.stacks().Get(1).pid, 4242);
}

TEST_F(EventProcessorTest, SampledTensorAllocationsCountAsWhatTheyStandFor) {
  events_.OnRecord(testing::TensorBatch(4242)
                       .Hook(10)
                       .Stack(0xabc1, 3, 1)
                       .SampledAlloc(11, 0x1000, 4096, 0xabc1, 1 << 20)
                       .Alloc(12, 0x2000, 1024, 0xabc1)  // the next record is still read in step
                       .SampledAlloc(13, 0x3000, 4096, 0xabc1, 1)  // less than itself: itself
                       .Free(14, 0x1000)
                       .Build());
  EXPECT_EQ(events_.stats().malformed, 0u);
  EXPECT_EQ(events_.stats().inprocess_events, 4u);
  const StackCounters& c = events_.tracker().counters()[0];
  EXPECT_EQ(c.alloc_bytes, (1 << 20) + 1024 + 4096);
  EXPECT_EQ(c.alloc_objects, 256 + 1 + 1);
  EXPECT_EQ(c.alloc_samples, 3);
  EXPECT_EQ(c.inuse_bytes, 1024 + 4096);
  // The profile carries what was seen, and says it holds estimates.
  Profile p = BuildMemoryProfile(StackSource{events_.stacks(), events_.frames()},
                                 events_.tracker().CountersWithPeaks(PeakScope::kAllTime), GF_DOMAIN_TORCH, {},
                                 std::nullopt, 0, 0);
  ASSERT_EQ(p.sample_types.size(), 7u);
  EXPECT_EQ(p.sample_types[4].type, "peak_objects");
  EXPECT_EQ(p.sample_types[5].type, "peak_space");
  EXPECT_EQ(p.sample_types[6].type, "alloc_samples");
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].values[5], (1 << 20) + 1024 + 4096) << "the peak: all three live at once";
  EXPECT_EQ(p.samples[0].values[6], 3);
  ASSERT_EQ(p.comments.size(), 1u);
  EXPECT_NE(p.comments[0].find("sampled by bytes"), std::string::npos);
}

TEST_F(EventProcessorTest, ASampledRunsTotalsRecordKeepsTheAllocatorsTotalsCurrent) {
  // The last event sent said 8 KiB allocated; two not sent since left 12 KiB
  // on device 0, and device 1 holds 1 MiB: the totals records say so.
  events_.OnRecord(testing::TensorBatch(4242)
                       .Hook(10)
                       .Stack(0xabc1, 3, 1)
                       .Alloc(11, 0x1000, 8192, 0xabc1, 8192, 2 << 20)
                       .Totals(20, 0, 12288, 2 << 20)
                       .Totals(21, 1, 1 << 20, 2 << 20)
                       .Build());
  EXPECT_EQ(events_.stats().malformed, 0u);
  const AllocatorTotals& t = events_.allocator_totals().at(4242);
  EXPECT_TRUE(t.known);
  EXPECT_EQ(t.allocated, 12288u + (1 << 20));
  EXPECT_EQ(t.reserved, 4u << 20);
  // Tensor events they are not: nothing is allocated or freed by them.
  EXPECT_EQ(events_.stats().inprocess_events, 1u);
  EXPECT_EQ(events_.tracker().counters()[0].inuse_bytes, 8192);
}

TEST_F(EventProcessorTest, InProcessStackNeverReceivedIsChargedToAMarker) {
  events_.OnRecord(testing::TensorBatch(4242).Hook(1).Alloc(2, 0x1000, 4096, 0x77).Build());
  EXPECT_EQ(events_.stats().inprocess_unknown_stacks, 1u);
  ASSERT_EQ(events_.stacks().size(), 1u);
  const StackInfo& s = events_.stacks().Get(0);
  EXPECT_EQ(events_.frames().Get(s.frames.front()).name, kStackUnknownFrame);
  EXPECT_EQ(events_.tracker().counters()[0].inuse_bytes, 4096);
}

TEST_F(EventProcessorTest, InProcessEventsFromAnotherAbiOrBeforeTheHookAreIgnored) {
  events_.OnRecord(testing::TensorBatch(4242).Hook(1, GF_TENSOR_HOOK_LIVE, GF_ABI_VERSION + 1)
                       .Stack(5, 2, 1).Alloc(2, 0x1000, 4096, 5).Build());
  EXPECT_EQ(events_.tracker().stats().allocs, 0u);
  EXPECT_EQ(events_.stacks().size(), 0u);
}

TEST_F(EventProcessorTest, MalformedTensorBatchesStopAtTheFirstBadRecord) {
  auto good = testing::TensorBatch(4242).Hook(1).Stack(5, 2, 1).Alloc(2, 0x1000, 4096, 5).Build();
  auto truncated = good;
  truncated.resize(truncated.size() - 4);
  reinterpret_cast<gf_event*>(truncated.data())->size -= 4;  // the outer size still agrees
  events_.OnRecord(truncated);
  EXPECT_EQ(events_.stats().malformed, 1u);
  EXPECT_EQ(events_.tracker().stats().allocs, 0u) << "the cut record is not read";
  auto lying = good;
  reinterpret_cast<gf_event*>(lying.data())->size += 8;  // outer size beyond the payload
  events_.OnRecord(lying);
  EXPECT_EQ(events_.stats().malformed, 2u);
  auto deep = testing::TensorBatch(4242).Hook(1).Stack(5, 2, 1).Build();
  // py_count of the stack record (after the outer header and the hook record) past the frame limit.
  reinterpret_cast<gf_event*>(deep.data() + sizeof(gf_event) * 2)->py_count = GF_MAX_PY_FRAMES + 1;
  events_.OnRecord(deep);
  EXPECT_EQ(events_.stats().malformed, 3u);
}

// Names of a stack's frames, root first.
std::vector<std::string> FrameNames(const EventProcessor& ev, StackId id) {
  std::vector<std::string> out;
  for (FrameId f : ev.stacks().Get(id).frames) out.push_back(ev.frames().Get(f).name);
  return out;
}

TEST_F(EventProcessorTest, AutogradEngineAllocationsGoBelowTheBackwardCallersStack) {
  events_.OnRecord(testing::TensorBatch(4242)
                       .Hook(1)
                       .Stack(0xabc1, 3, 1)             // the caller's stack, sent when backward() began
                       .Alloc(2, 0x1000, 1024, 0xabc1)  // its own forward allocation
                       .AutogradAlloc(3, 0x2000, 4096, 0xabc1)
                       .AutogradAlloc(4, 0x3000, 2048, 0xabc1)
                       .AutogradAlloc(5, 0x4000, 512, 0xdead)  // a caller never received
                       .Build());
  EXPECT_EQ(events_.stats().malformed, 0u);
  EXPECT_EQ(events_.stats().autograd_events, 2u);
  EXPECT_EQ(events_.stats().autograd_unknown_origins, 1u);
  EXPECT_EQ(events_.stats().inprocess_unknown_stacks, 1u);
  ASSERT_EQ(events_.stacks().size(), 3u);  // the caller's, the engine's below it, the unknown marker
  const std::vector<std::string> caller = FrameNames(events_, 0);
  const std::vector<std::string> engine = FrameNames(events_, 1);
  ASSERT_EQ(caller.size(), 4u);  // three Python frames and the allocator's leaf
  ASSERT_EQ(engine.size(), caller.size() + 1);
  for (size_t i = 0; i + 1 < caller.size(); i++) EXPECT_EQ(engine[i], caller[i]) << i;
  EXPECT_EQ(engine[caller.size() - 1], kAutogradFrame);
  EXPECT_EQ(engine.back(), caller.back()) << "the allocator's leaf stays the leaf";
  const auto& counters = events_.tracker().counters();
  EXPECT_EQ(counters[0].alloc_bytes, 1024);
  EXPECT_EQ(counters[1].alloc_bytes, 4096 + 2048);
  EXPECT_EQ(counters[1].alloc_objects, 2);
  EXPECT_EQ(FrameNames(events_, 2), std::vector<std::string>{kStackUnknownFrame});
}

TEST_F(EventProcessorTest, AutogradAllocationsDuringSeveralBackwardCallsAreNotGuessed) {
  events_.OnRecord(testing::TensorBatch(4242)
                       .Hook(1)
                       .Stack(0xabc1, 3, 1)
                       .AutogradAlloc(2, 0x1000, 4096, /*ref=*/2, /*ambiguous=*/true)
                       .AutogradAlloc(3, 0x2000, 4096, /*ref=*/2, /*ambiguous=*/true)
                       .AutogradAlloc(4, 0x3000, 4096, /*ref=*/1u << 30, /*ambiguous=*/true)  // the workload's number
                       .Build());
  EXPECT_EQ(events_.stats().autograd_events, 0u);
  EXPECT_EQ(events_.stats().autograd_events_ambiguous, 3u);
  ASSERT_EQ(events_.stacks().size(), 3u);
  EXPECT_EQ(FrameNames(events_, 1).front(), "<autograd engine: 2 concurrent backward calls>");
  EXPECT_EQ(FrameNames(events_, 1).size(), 2u) << "the marker, then the allocator's leaf";
  EXPECT_EQ(FrameNames(events_, 2).front(), "<autograd engine: over 99 concurrent backward calls>");
  EXPECT_EQ(events_.tracker().counters()[1].alloc_bytes, 8192);
}

TEST_F(EventProcessorTest, AutogradEngineLaunchesGoBelowTheBackwardCallersStack) {
  events_.OnRecord(testing::TensorBatch(4242).Hook(1).Stack(0xabc1, 3, 1).Build());
  const uint64_t ips[2] = {0x1000, 0x2000};
  auto launch = [&](uint32_t correlation, uint64_t origin, uint64_t concurrent, int py_depth) {
    gf_event ev = testing::Header(GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, 4242);
    ev.arg0 = correlation;
    ev.arg2 = origin;
    ev.size = concurrent;
    if (py_depth) {
      events_.OnRecord(testing::PythonRecord(ev, py_depth, 9));
      return;
    }
    ev.native_count = 2;
    events_.OnRecord(testing::MakeRecord(ev, ips, sizeof(ips)));
  };
  launch(1, 0xabc1, 1, 0);  // an engine thread, one backward() running
  launch(2, 0, 0, 0);       // the same thread, no backward() running
  launch(3, 0, 3, 0);       // three running
  launch(4, 0xabc1, 1, 2);  // a thread with Python frames of its own keeps them
  launch(5, 0x5555, 1, 0);  // a caller stack never received: its own stack, no guess
  EXPECT_EQ(events_.stats().autograd_launches, 1u);
  EXPECT_EQ(events_.stats().autograd_launches_ambiguous, 1u);
  EXPECT_EQ(events_.stats().autograd_unknown_origins, 1u);
  const char name[] = "gemm";
  gf_event n = testing::Header(GF_EV_KERNEL_NAME, GF_DOMAIN_NONE, GF_API_NONE, 4242);
  n.arg0 = 1;
  events_.OnRecord(testing::MakeRecord(n, name, sizeof(name)));
  std::vector<gf_kernel_record> kernels;
  for (uint32_t c = 1; c <= 5; c++) {
    gf_kernel_record k{};
    k.kind = GF_GPU_KERNEL;
    k.correlation = c;
    k.name_id = 1;
    k.start_ns = 100;
    k.end_ns = 100 + c * 1000;
    kernels.push_back(k);
  }
  events_.OnRecord(
      testing::ArrayRecord(testing::Header(GF_EV_KERNEL_BATCH, GF_DOMAIN_NONE, GF_API_NONE, 4242), kernels));
  events_.joiner().Flush(1'000'000'000);
  // By time: each correlation's kernel ran c us, so its stack is told by its
  // total (2 and 5 share the thread's own stack: 7 us).
  std::map<int64_t, std::vector<std::string>> by_nanos;
  for (const auto& [key, c] : events_.kernels().totals()) by_nanos[c.nanos] = FrameNames(events_, key.stack);
  ASSERT_EQ(by_nanos.size(), 4u);
  const std::vector<std::string> caller = FrameNames(events_, 0);
  const std::vector<std::string>& engine = by_nanos[1000];
  ASSERT_GE(engine.size(), caller.size() + 1);
  for (size_t i = 0; i + 1 < caller.size(); i++) EXPECT_EQ(engine[i], caller[i]) << i;
  EXPECT_EQ(engine[caller.size() - 1], kAutogradFrame);
  EXPECT_EQ(engine.back(), "gemm");
  ASSERT_FALSE(by_nanos[7000].empty());
  for (const std::string& f : by_nanos[7000]) EXPECT_EQ(f.find("<autograd engine"), std::string::npos) << f;
  EXPECT_EQ(by_nanos[3000].front(), "<autograd engine: 3 concurrent backward calls>");
  for (const std::string& f : by_nanos[4000]) EXPECT_EQ(f.find("<autograd engine"), std::string::npos) << f;
}

}  // namespace
}  // namespace gpuflame::profiler

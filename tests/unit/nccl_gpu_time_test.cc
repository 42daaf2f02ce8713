// profiler/collectives/nccl_gpu_time.cc: NCCL's kernels' GPU time joined
// back to the call that launched them (by thread at the launch, by
// correlation ID at the record), a group's to its ncclGroupEnd, bus
// bandwidth on GPU time, and every record or launch not joined counted;
// the kernel-name test the injection library and user space share.
#include <gtest/gtest.h>

#include <cstring>

#include <string>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "bpf/nccl_kernel_name.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kMiB = 1 << 20;
constexpr int kFloat32 = 7;
constexpr uint32_t kNcclName = 5, kOtherName = 6;
constexpr size_t kAllReduce = GF_API_NCCL_ALL_REDUCE - GF_API_NCCL_ALL_REDUCE;
constexpr size_t kSend = GF_API_NCCL_SEND - GF_API_NCCL_ALL_REDUCE;
constexpr size_t kGroupEnd = GF_API_NCCL_GROUP_END - GF_API_NCCL_ALL_REDUCE;

NcclCall Call(pid_t pid, uint64_t ts, uint16_t api, uint64_t comm = 0, uint64_t count = 0, StackId stack = 1) {
  NcclCall c;
  c.pid = pid;
  c.tid = static_cast<uint32_t>(pid);
  c.ts_ns = ts;
  c.api = api;
  c.comm = comm;
  c.count = count;
  c.datatype = count ? kFloat32 : GF_NCCL_NO_OP;
  c.op = GF_NCCL_NO_OP;
  c.stack = stack;
  return c;
}

// Four ranks of one communicator: pid 10 holds rank 0 (communicator 0xa).
void FourRanks(NcclTracker& t) {
  for (int rank = 0; rank < 4; rank++) {
    NcclCall c = Call(10 + rank, 0, GF_API_NCCL_COMM_INIT_RANK, 0, 4);
    c.peer = rank;
    c.id_lo = 0x11;
    c.id_hi = 0x22;
    t.OnCall(c);
    t.OnReturn(10 + rank, 10 + rank, 1, 0xa + rank, 0);
  }
}

gf_kernel_record Kernel(uint32_t correlation, uint64_t start, uint64_t end, uint32_t name = kNcclName,
                        uint16_t weight = 1) {
  gf_kernel_record r{};
  r.kind = GF_GPU_KERNEL;
  r.correlation = correlation;
  r.start_ns = start;
  r.end_ns = end;
  r.name_id = name;
  r.weight = weight;
  return r;
}

TEST(NcclKernelNameTest, NcclsKernelsMangledOrPlainAndNothingElse) {
  for (const char* name : {"_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                           "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE", "ncclDevKernel_Generic",
                           "_Z42ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32P7ncclWork",
                           "_Z31ncclKernel_AllReduce_RING_LL_Sum_float13ncclWorkElem"}) {
    EXPECT_TRUE(IsNcclKernelName(name)) << name;
    EXPECT_TRUE(IsNcclKernelName(name, std::strlen(name))) << name;
  }
  for (const char* name : {"", "_Z", "_Z39", "nccl", "ncclDev", "ncclDevKernel", "_Z5ncclX",
                           "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", "my_ncclDevKernel_x",
                           "_Z1234ncclDevKernel_x", "ncclAllReduce"}) {
    EXPECT_FALSE(IsNcclKernelName(name)) << name;
    EXPECT_FALSE(IsNcclKernelName(name, std::strlen(name))) << name;
  }
  EXPECT_FALSE(IsNcclKernelName(nullptr));
  // A length bound is kept: no byte past it is read (a name cut short is not NCCL's).
  EXPECT_FALSE(IsNcclKernelName("ncclDevKernel_x", 13));
  EXPECT_TRUE(IsNcclKernelName("ncclDevKernel_x", 14));
}

TEST(NcclApiTest, BusBytesAsNcclTestsCountThem) {
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_ALL_REDUCE, 400, 4), 600u);  // x 2(n-1)/n
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_ALL_REDUCE, 400, 2), 400u);
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_ALL_GATHER, 100, 4), 300u);  // one rank's part x (n-1)
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_REDUCE_SCATTER, 100, 8), 700u);
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_BROADCAST, 100, 0), 100u);
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_SEND, 100, 0), 100u);
  EXPECT_FALSE(NcclBusBytes(GF_API_NCCL_ALL_REDUCE, 100, 0).has_value());  // its size not known
  EXPECT_FALSE(NcclBusBytes(GF_API_NCCL_GROUP_END, 100, 4).has_value());
  EXPECT_EQ(NcclBusBytes(GF_API_NCCL_ALL_GATHER, UINT64_MAX, 8), UINT64_MAX);  // saturates
}

TEST(NcclGpuTimeTest, KernelsLaunchedInsideACallAreItsOwn) {
  NcclTracker t;
  FourRanks(t);
  t.OnKernelName(10, kNcclName, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE");
  t.OnKernelName(10, kOtherName, "_Z6kernelv");
  // An all-reduce of 4 MiB of float32 on stack 7 launches two kernels.
  t.OnCall(Call(10, 10 * kMs, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 7));
  t.OnLaunch(10, 10, 100, 10 * kMs + 1);
  t.OnLaunch(10, 10, 101, 10 * kMs + 2);
  t.OnLaunch(10, 99, 102, 10 * kMs + 3);  // another thread: not the call's
  t.OnReturn(10, 10, 11 * kMs, 0, 0);
  t.OnLaunch(10, 10, 103, 12 * kMs);  // after it returned: not the call's
  const std::vector<gf_kernel_record> records = {
      Kernel(100, 20 * kMs, 23 * kMs), Kernel(101, 23 * kMs, 24 * kMs),
      Kernel(102, 24 * kMs, 25 * kMs, kOtherName),  // someone else's kernel: not counted anywhere
      Kernel(103, 25 * kMs, 27 * kMs),              // NCCL's, not joined: counted, charged to no call
  };
  t.OnGpuRecords(10, records);
  EXPECT_EQ(t.totals().at(7).gpu_nanos, 4 * kMs);
  EXPECT_EQ(t.by_api()[kAllReduce].gpu_nanos, 4 * kMs);
  const NcclGpuTotals& g = t.gpu_by_api()[kAllReduce];
  EXPECT_EQ(g.calls, 1u);  // two kernels, one call
  EXPECT_EQ(g.nanos, 4 * kMs);
  EXPECT_EQ(g.bytes, 4 * kMiB);
  EXPECT_EQ(g.bus_bytes, 6 * kMiB);  // 4 ranks: x 2(n-1)/n = 1.5
  EXPECT_EQ(g.bus_nanos, 4 * kMs);
  EXPECT_DOUBLE_EQ(*NcclBusBandwidth(g), 6.0 * kMiB / 0.004);
  const NcclStats& s = t.stats();
  EXPECT_EQ(s.gpu_launches, 2u);
  EXPECT_EQ(s.gpu_records, 2u);
  EXPECT_EQ(s.gpu_records_not_joined, 1u);
  EXPECT_EQ(s.gpu_nanos_not_joined, 2 * kMs);
  // A record joins once: the same correlation again is not counted twice.
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(100, 30 * kMs, 31 * kMs)});
  EXPECT_EQ(t.totals().at(7).gpu_nanos, 4 * kMs);
  EXPECT_EQ(s.gpu_records_not_joined, 2u);
}

// The launch route's hits are joined to their correlation IDs a flush
// later, after the NCCL call has returned: the call is taken at the hit,
// in order with its entry and return, and the kernel goes to it once the
// hit is joined. A hit outside any call, or never joined, goes nowhere
// (the latter counted without a record once old).
TEST(NcclGpuTimeTest, TheLaunchRoutesHitsGoToTheCallTheyWereMadeIn) {
  NcclTracker t;
  FourRanks(t);
  t.OnKernelName(10, kNcclName, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE");
  t.OnCall(Call(10, 10 * kMs, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 7));
  t.OnLaunchHit(10, 10, 10 * kMs + 1);
  t.OnLaunchHit(10, 10, 10 * kMs + 2);  // never joined
  t.OnReturn(10, 10, 11 * kMs, 0, 0);
  t.OnLaunchHit(10, 10, 12 * kMs);  // after it returned: not the call's
  // The joins, a flush later: one of each.
  t.OnLaunchJoined(10, 10, 100, 10 * kMs + 1);
  t.OnLaunchJoined(10, 10, 101, 12 * kMs);
  t.OnLaunchJoined(10, 10, 102, 13 * kMs);  // no such hit
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(100, 20 * kMs, 23 * kMs), Kernel(101, 23 * kMs, 24 * kMs)});
  EXPECT_EQ(t.totals().at(7).gpu_nanos, 3 * kMs);
  const NcclGpuTotals& g = t.gpu_by_api()[kAllReduce];
  EXPECT_EQ(g.calls, 1u);
  EXPECT_EQ(g.bytes, 4 * kMiB);                     // the first launch's, which carries the call's bytes
  EXPECT_EQ(t.stats().gpu_launches, 1u);            // a hit counts once joined
  EXPECT_EQ(t.stats().gpu_records_not_joined, 1u);  // 101's: launched outside the call
  // The hit never joined is let go at the TTL (the route's joiner counts it).
  t.Tick(60'000 * kMs);
  EXPECT_EQ(t.stats().gpu_launches_without_record, 0u);
}

// As a process is handed back to the callbacks (its first NCCL kernel),
// one launch may be taken both ways: one launch, whose first-ness stays.
TEST(NcclGpuTimeTest, ALaunchTakenByTheRouteAndTheCallbacksCountsOnce) {
  NcclTracker t;
  FourRanks(t);
  t.OnKernelName(10, kNcclName, "_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE");
  t.OnCall(Call(10, 10 * kMs, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 7));
  t.OnLaunchHit(10, 10, 10 * kMs + 1);  // takes the call's first launch
  t.OnLaunch(10, 10, 100, 10 * kMs + 1);
  t.OnReturn(10, 10, 11 * kMs, 0, 0);
  t.OnLaunchJoined(10, 10, 100, 10 * kMs + 1);
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(100, 20 * kMs, 23 * kMs)});
  EXPECT_EQ(t.stats().gpu_launches, 1u);
  const NcclGpuTotals& g = t.gpu_by_api()[kAllReduce];
  EXPECT_EQ(g.calls, 1u);
  EXPECT_EQ(g.bytes, 4 * kMiB);
  EXPECT_EQ(g.nanos, 3 * kMs);
}

TEST(NcclGpuTimeTest, WeightedRecordsStandForTheirWeight) {
  NcclTracker t;
  FourRanks(t);
  t.OnCall(Call(10, 0, GF_API_NCCL_SEND, 0xa, kMiB / 4, 8));  // 1 MiB
  t.OnLaunch(10, 10, 7, 1);
  t.OnReturn(10, 10, 2, 0, 0);
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(7, 0, kMs, kNcclName, /*weight=*/10)});
  const NcclGpuTotals& g = t.gpu_by_api()[kSend];
  EXPECT_EQ(g.calls, 10u);
  EXPECT_EQ(g.nanos, 10 * kMs);
  EXPECT_EQ(g.bytes, 10 * kMiB);
  EXPECT_EQ(g.bus_bytes, 10 * kMiB);
  EXPECT_EQ(t.totals().at(8).gpu_nanos, 10 * kMs);
}

TEST(NcclGpuTimeTest, AGroupsKernelsGoToItsGroupEndWithItsCallsBytes) {
  NcclTracker t;
  FourRanks(t);
  t.OnCall(Call(10, 0, GF_API_NCCL_GROUP_START, 0, 0, 1));
  t.OnReturn(10, 10, 1, 0, 0);
  t.OnCall(Call(10, 2, GF_API_NCCL_SEND, 0xa, kMiB / 4, 2));  // 1 MiB
  t.OnReturn(10, 10, 3, 0, 0);
  t.OnCall(Call(10, 4, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 3));  // 4 MiB, bus 6 MiB
  t.OnReturn(10, 10, 5, 0, 0);
  t.OnCall(Call(10, 6, GF_API_NCCL_GROUP_END, 0, 0, 4));
  t.OnLaunch(10, 10, 50, 7);
  t.OnReturn(10, 10, 8, 0, 0);
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(50, 0, 5 * kMs)});
  EXPECT_EQ(t.totals().at(4).gpu_nanos, 5 * kMs);
  EXPECT_EQ(t.totals().at(2).gpu_nanos, 0u);
  EXPECT_EQ(t.totals().at(3).gpu_nanos, 0u);
  const NcclGpuTotals& g = t.gpu_by_api()[kGroupEnd];
  EXPECT_EQ(g.calls, 1u);
  EXPECT_EQ(g.bytes, 5 * kMiB);
  EXPECT_EQ(g.bus_bytes, 7 * kMiB);
  EXPECT_EQ(t.gpu_by_api()[kSend].nanos, 0u);
  EXPECT_EQ(t.gpu_by_api()[kAllReduce].nanos, 0u);
}

TEST(NcclGpuTimeTest, UnknownSizeLeavesBandwidthOutNotTime) {
  NcclTracker t;
  // No init seen: the all-reduce's communicator size is not known.
  t.OnCall(Call(10, 0, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 7));
  t.OnLaunch(10, 10, 1, 1);
  t.OnReturn(10, 10, 2, 0, 0);
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(1, 0, kMs)});
  const NcclGpuTotals& g = t.gpu_by_api()[kAllReduce];
  EXPECT_EQ(g.nanos, kMs);
  EXPECT_EQ(g.bytes, 4 * kMiB);
  EXPECT_EQ(g.bus_bytes, 0u);
  EXPECT_EQ(g.bus_nanos, 0u);
  EXPECT_FALSE(NcclBusBandwidth(g).has_value());
}

TEST(NcclGpuTimeTest, LaunchesInOtherCallsAndUnansweredOnesAreCounted) {
  NcclTracker t;
  FourRanks(t);
  t.OnCall(Call(10, 0, GF_API_NCCL_COMM_DESTROY, 0xa));
  t.OnLaunch(10, 10, 1, 1);  // a copy inside destroy: no operation to charge
  t.OnReturn(10, 10, 2, 0, 0);
  EXPECT_EQ(t.stats().gpu_launches_other_calls, 1u);
  t.OnCall(Call(11, 0, GF_API_NCCL_ALL_REDUCE, 0xb, kMiB, 7));
  t.OnLaunch(11, 11, 2, 1);
  t.OnReturn(11, 11, 2, 0, 0);
  t.OnCall(Call(12, 0, GF_API_NCCL_ALL_REDUCE, 0xc, kMiB, 7));
  t.OnLaunch(12, 12, 3, 1);
  t.OnReturn(12, 12, 2, 0, 0);
  EXPECT_EQ(t.stats().gpu_launches, 2u);
  t.Tick(NcclTracker::kGpuLaunchTtlNs + 2);  // too old: its record never came
  EXPECT_EQ(t.stats().gpu_launches_without_record, 2u);
  t.OnCall(Call(13, 0, GF_API_NCCL_ALL_REDUCE, 0xd, kMiB, 7));
  t.OnLaunch(13, 13, 4, NcclTracker::kGpuLaunchTtlNs);
  t.OnProcessExit(13, NcclTracker::kGpuLaunchTtlNs + 1);  // its process ended first
  EXPECT_EQ(t.stats().gpu_launches_without_record, 3u);
  // A correlation ID given twice before the first's record came: one
  // launch waits, the other is counted as lost, not silently overwritten.
  t.OnCall(Call(14, 0, GF_API_NCCL_ALL_REDUCE, 0xe, kMiB, 7));
  t.OnLaunch(14, 14, 5, 1);
  t.OnLaunch(14, 14, 5, 2);
  t.OnReturn(14, 14, 3, 0, 0);
  EXPECT_EQ(t.stats().gpu_launches_replaced, 1u);
  t.Finish(3);
  EXPECT_EQ(t.stats().gpu_launches, 5u);
  EXPECT_EQ(t.stats().gpu_launches_without_record + t.stats().gpu_launches_replaced, t.stats().gpu_launches);
}

TEST(NcclGpuTimeTest, TheReportsCarryIt) {
  NcclTracker t;
  FourRanks(t);
  t.OnCall(Call(10, 0, GF_API_NCCL_ALL_REDUCE, 0xa, kMiB, 7));
  t.OnLaunch(10, 10, 1, 1);
  t.OnReturn(10, 10, kMs, 0, 0);
  t.OnGpuRecords(10, std::vector<gf_kernel_record>{Kernel(1, 0, 2 * kMs)});
  StackTable stacks;
  FrameTable frames;
  const std::string json = NcclJson(t, StackSource{stacks, frames}, {}, 0);
  EXPECT_NE(json.find("{\"operation\": \"ncclAllReduce\", \"calls\": 1, \"seconds\": 0.001000, \"bytes\": 4194304, "
                      "\"gpu\": {\"calls\": 1, \"seconds\": 0.002000, \"bytes\": 4194304, \"bus_bytes\": 6291456, "
                      "\"bus_bandwidth_gb_per_s\": 3.146}}"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find("\"gpu_time\": {\"launches\": 1, \"launches_in_other_calls\": 0, \"launches_dropped\": 0, "
                "\"launches_without_record\": 0, \"launches_replaced\": 0, \"records\": 1, \"records_not_joined\": 0, "
                "\"seconds_not_joined\": 0.000000, \"kernel_names_dropped\": 0}"),
      std::string::npos)
      << json;
  const std::vector<std::string> lines = NcclLines(t);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1], "  ncclAllReduce: 1 calls, 0.001 s, 4.00 MiB; GPU 2.000 ms in 1 calls, bus 3.15 GB/s");
}

}  // namespace
}  // namespace gpuflame::profiler

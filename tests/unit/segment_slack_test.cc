// The caching allocator's slack by address arithmetic (segment_slack.h),
// through the AllocationTracker that feeds it: exact values per stack.
#include <gtest/gtest.h>

#include "bpf/gpuflame_abi.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/aggregate/window.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr pid_t kPid = 7;
constexpr StackId kSmallSeg = 1, kLargeSeg = 2, kTensor = 3, kOtherSeg = 4;

void Segment(AllocationTracker& t, uint64_t base, uint64_t size, StackId stack, pid_t pid = kPid) {
  t.OnAlloc(pid, GF_DOMAIN_GPU, false, base, size, stack);
}
void Block(AllocationTracker& t, uint64_t addr, uint64_t size, pid_t pid = kPid) {
  t.OnAlloc(pid, GF_DOMAIN_TORCH, false, addr, size, kTensor);
}
int64_t Unused(const AllocationTracker& t, StackId s) { return t.counters()[s].unused_bytes; }
int64_t UnusedSegments(const AllocationTracker& t, StackId s) { return t.counters()[s].unused_objects; }

TEST(SegmentSlackTest, BlocksInsideSegmentsAreChargedToTheStackThatMadeThem) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Segment(t, 0x20000000, 20 * kMiB, kLargeSeg);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  EXPECT_EQ(UnusedSegments(t, kSmallSeg), 1);
  // Three small blocks in the small segment, one at its last byte.
  Block(t, 0x10000000, 512);
  Block(t, 0x10000200, 4096);
  Block(t, 0x10000000 + 2 * kMiB - 512, 512);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB - 512 - 4096 - 512);
  // The large segment wholly used: no unused, and not counted as a segment with some.
  Block(t, 0x20000000, 20 * kMiB);
  EXPECT_EQ(Unused(t, kLargeSeg), 0);
  EXPECT_EQ(UnusedSegments(t, kLargeSeg), 0);
  EXPECT_EQ(t.counters()[kTensor].unused_bytes, 0) << "tensor stacks hold no slack";
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000200, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB - 1024);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x20000000, 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 20 * kMiB);
  EXPECT_EQ(UnusedSegments(t, kLargeSeg), 1);
  const SlackTotals s = t.Slack(kPid);
  EXPECT_EQ(s.segments, 2);
  EXPECT_EQ(s.reserved_bytes, 22 * kMiB);
  EXPECT_EQ(s.tensor_bytes, 1024);
  EXPECT_EQ(s.unused_bytes, 22 * kMiB - 1024);
  EXPECT_EQ(s.unknown_blocks, 0);
  // A freed segment takes its slack with it.
  t.OnFree(kPid, GF_DOMAIN_GPU, false, 0x20000000, 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 0);
  EXPECT_EQ(UnusedSegments(t, kLargeSeg), 0);
  EXPECT_EQ(t.Slack(kPid).reserved_bytes, 2 * kMiB);
}

TEST(SegmentSlackTest, ABlockInNoKnownSegmentIsCountedNotGuessed) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Block(t, 0x0fffff00, 512);               // just before it
  Block(t, 0x10000000 + 2 * kMiB, 512);   // at its end, exclusive
  Block(t, 0x90000000, 8 * kMiB);          // allocated before gpuflame attached
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  SlackTotals s = t.Slack(kPid);
  EXPECT_EQ(s.unknown_blocks, 3);
  EXPECT_EQ(s.unknown_bytes, 8 * kMiB + 1024);
  EXPECT_EQ(s.tensor_bytes, 0);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x90000000, 0);
  s = t.Slack(kPid);
  EXPECT_EQ(s.unknown_blocks, 2);
  EXPECT_EQ(s.unknown_bytes, 1024);
}

TEST(SegmentSlackTest, ASegmentFreedWithBlocksLiveLeavesNothingBehind) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Block(t, 0x10000000, 512 * 1024);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB - 512 * 1024);
  // The driver's free arrives before the block's (tensor batches trail), and
  // a new segment comes at the same address under another stack.
  t.OnFree(kPid, GF_DOMAIN_GPU, false, 0x10000000, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  EXPECT_EQ(UnusedSegments(t, kSmallSeg), 0);
  Segment(t, 0x10000000, 2 * kMiB, kOtherSeg);
  EXPECT_EQ(Unused(t, kOtherSeg), 2 * kMiB);
  // The old block's free belongs to the old segment: the new one is untouched.
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 0);
  EXPECT_EQ(Unused(t, kOtherSeg), 2 * kMiB);
  EXPECT_EQ(t.slack_stats().blocks_outlived_segment, 1u);
  EXPECT_EQ(t.Slack(kPid).tensor_bytes, 0);
}

TEST(SegmentSlackTest, HostileBlocksNeverChargeBeyondTheirSegment) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Segment(t, 0x10000000 + 2 * kMiB, 2 * kMiB, kOtherSeg);
  // Claims to span both: charged to the first only, up to its end.
  Block(t, 0x10000000 + kMiB, 3 * kMiB);
  EXPECT_EQ(Unused(t, kSmallSeg), kMiB);
  EXPECT_EQ(Unused(t, kOtherSeg), 2 * kMiB);
  EXPECT_EQ(t.slack_stats().blocks_past_end, 1u);
  // Overlapping blocks (as only a lying process sends): never below zero.
  Block(t, 0x10000000, 2 * kMiB);
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  EXPECT_EQ(t.Slack(kPid).tensor_bytes, 2 * kMiB);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), kMiB);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000 + kMiB, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  // Absurd sizes and ranges past the address space are not segments.
  Segment(t, ~uint64_t{0} - 10, 100, kLargeSeg);
  Segment(t, 0x50000000, 0, kLargeSeg);
  EXPECT_EQ(t.slack_stats().invalid_segments, 2u);
  EXPECT_EQ(Unused(t, kLargeSeg), 0);
  Block(t, 0x10000000, ~uint64_t{0});
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
}

TEST(SegmentSlackTest, AnOverlappingSegmentReplacesTheOldOne) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Segment(t, 0x10000000 + 2 * kMiB, 2 * kMiB, kSmallSeg);
  // A missed free: a new segment over both.
  Segment(t, 0x10000000 + kMiB, 2 * kMiB, kLargeSeg);
  EXPECT_EQ(t.slack_stats().overlapping_segments, 2u);
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 2 * kMiB);
  EXPECT_EQ(t.Slack(kPid).reserved_bytes, 2 * kMiB);
  // The old segments' frees no longer find them.
  t.OnFree(kPid, GF_DOMAIN_GPU, false, 0x10000000, 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 2 * kMiB);
  EXPECT_EQ(t.Slack(kPid).segments, 1);
}

TEST(SegmentSlackTest, ProcessesHandlesAndExitsAreKeptApart) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg, 1);
  Block(t, 0x10000000, kMiB, 2);  // another process: not in its segment
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  EXPECT_EQ(t.Slack(2).unknown_blocks, 1);
  // cuMemCreate handles are not address ranges: no segment.
  t.OnAlloc(1, GF_DOMAIN_GPU, true, 0x1, 20 * kMiB, kLargeSeg);
  EXPECT_EQ(Unused(t, kLargeSeg), 0);
  // An exited process keeps its slack at exit, as it keeps its in use.
  Block(t, 0x10000000, kMiB, 1);
  t.OnProcessExit(1);
  EXPECT_EQ(Unused(t, kSmallSeg), kMiB);
  EXPECT_EQ(t.Slack(1).segments, 1) << "its totals at exit stay for its last report";
  EXPECT_EQ(t.Slack(1).unused_bytes, kMiB);
  const pid_t gone[] = {1};
  t.ForgetPeaks(gone);
  EXPECT_EQ(t.Slack(1).segments, 0);
}

TEST(SegmentSlackTest, AWindowCarriesTheSlackAtItsEnd) {
  AllocationTracker t;
  WindowAccumulator w;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Block(t, 0x10000000, kMiB);
  auto first = w.Close(t.CountersWithPeaks(PeakScope::kWindow));
  EXPECT_EQ(first[kSmallSeg].unused_bytes, kMiB);
  EXPECT_EQ(first[kSmallSeg].unused_objects, 1);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 0);
  auto second = w.Close(t.CountersWithPeaks(PeakScope::kWindow));
  EXPECT_EQ(second[kSmallSeg].unused_bytes, 2 * kMiB);
}

TEST(SegmentSlackTest, LostRecordsAreAccountedLikeTheirOwn) {
  AllocationTracker t;
  t.OnLostAlloc(kPid, GF_DOMAIN_GPU, false, 0x10000000, 2 * kMiB, 1, kSmallSeg, 10);
  t.OnLostAlloc(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 4096, 1, kTensor, 11);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB - 4096);
  t.OnLostFree(kPid, GF_DOMAIN_TORCH, false, 0x10000000, 12);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  t.OnLostFree(kPid, GF_DOMAIN_GPU, false, 0x10000000, 13);
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  EXPECT_EQ(t.Slack(kPid).segments, 0);
}

TEST(SegmentSlackTest, ExpandableSegmentChunksAreSegmentsOfTheirHandlesStacks) {
  AllocationTracker t;
  constexpr uint64_t kVa = 0x40000000;
  // Two 2 MiB chunks (cuMemCreate) mapped side by side in one reserved range.
  t.OnAlloc(kPid, GF_DOMAIN_GPU, true, 0x5, 2 * kMiB, kSmallSeg);
  t.OnAlloc(kPid, GF_DOMAIN_GPU, true, 0x6, 2 * kMiB, kLargeSeg);
  t.OnMap(kPid, kVa, 2 * kMiB, 0x5, 0);
  t.OnMap(kPid, kVa + 2 * kMiB, 2 * kMiB, 0x6, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  EXPECT_EQ(Unused(t, kLargeSeg), 2 * kMiB);
  // A block across both chunks is charged to each for its part.
  Block(t, kVa + kMiB, 2 * kMiB);
  EXPECT_EQ(Unused(t, kSmallSeg), kMiB);
  EXPECT_EQ(Unused(t, kLargeSeg), kMiB);
  EXPECT_EQ(t.Slack(kPid).tensor_bytes, 2 * kMiB);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, kVa + kMiB, 0);
  EXPECT_EQ(Unused(t, kSmallSeg), 2 * kMiB);
  EXPECT_EQ(Unused(t, kLargeSeg), 2 * kMiB);
  // Past the last chunk it goes no further.
  Block(t, kVa + 3 * kMiB, 4 * kMiB);
  EXPECT_EQ(Unused(t, kLargeSeg), kMiB);
  EXPECT_EQ(t.slack_stats().blocks_past_end, 1u);
  t.OnFree(kPid, GF_DOMAIN_TORCH, false, kVa + 3 * kMiB, 0);
  // Unmapped, the chunk's slack goes; the handle's in use stays its own.
  t.OnUnmap(kPid, kVa + 2 * kMiB, 2 * kMiB, 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 0);
  EXPECT_EQ(t.counters()[kLargeSeg].inuse_bytes, 2 * kMiB);
  EXPECT_EQ(t.Slack(kPid).reserved_bytes, 2 * kMiB);
  // A handle from before gpuflame attached has no stack: counted, not kept.
  t.OnMap(kPid, kVa + 8 * kMiB, 2 * kMiB, 0x99, 0);
  EXPECT_EQ(t.stats().maps_of_unknown_handles, 1u);
  EXPECT_EQ(t.Slack(kPid).segments, 1);
}

TEST(SegmentSlackTest, CudaMallocSegmentsThatMeetAreNotOneRange) {
  AllocationTracker t;
  Segment(t, 0x10000000, 2 * kMiB, kSmallSeg);
  Segment(t, 0x10000000 + 2 * kMiB, 2 * kMiB, kLargeSeg);
  Block(t, 0x10000000, 3 * kMiB);
  EXPECT_EQ(Unused(t, kSmallSeg), 0);
  EXPECT_EQ(Unused(t, kLargeSeg), 2 * kMiB) << "a cudaMalloc range ends where it ends";
}

}  // namespace
}  // namespace gpuflame::profiler

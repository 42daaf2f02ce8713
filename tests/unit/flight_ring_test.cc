// The agent's flight recorder (profiler/timeline/flight_ring.h): the time
// window, the per-process and total bounds, eviction counting; and the
// timeline's snapshot of it written as a trace (exporters/trace) that
// passes the schema check, with only the processes asked for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/trace/chrome_trace.h"
#include "profiler/timeline/flight_ring.h"
#include "profiler/timeline/gpu_clock.h"
#include "profiler/timeline/timeline.h"
#include "tests/support/trace_schema.h"

namespace gpuflame::profiler::timeline {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

Event At(uint32_t pid, uint64_t ts, uint32_t ref = 0) {
  return {.ts_ns = ts, .end_ns = ts, .pid = pid, .tid = pid, .ref = ref, .type = EventType::kMemory};
}

std::vector<uint64_t> Times(const FlightRing& ring, uint32_t pid, uint64_t since = 0) {
  std::deque<Event> out;
  ring.CopySince(pid, since, out);
  std::vector<uint64_t> ts;
  for (const Event& e : out) ts.push_back(e.ts_ns / kSecond);
  return ts;
}

TEST(FlightRingTest, KeepsTheLastWindowAndCountsWhatAgedOut) {
  FlightRing ring({.window_ns = 3 * kSecond, .max_process_events = 100, .max_total_events = 1000});
  for (uint64_t s = 1; s <= 10; s++) ring.Push(At(1, s * kSecond), s * kSecond);
  EXPECT_EQ(Times(ring, 1), (std::vector<uint64_t>{7, 8, 9, 10}));  // 10 - 3 = 7 is still in the window
  EXPECT_EQ(Times(ring, 1, 9 * kSecond), (std::vector<uint64_t>{9, 10}));
  const FlightRingStats s = ring.stats();
  EXPECT_EQ(s.pushed, 10u);
  EXPECT_EQ(s.aged_out, 6u);
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.events, 4u);
  EXPECT_EQ(ring.ProcessStats(1).oldest_ns, 7 * kSecond);
  // Another process's time does not age this one's out.
  ring.Push(At(2, 100 * kSecond), 100 * kSecond);
  EXPECT_EQ(Times(ring, 1).size(), 4u);
}

TEST(FlightRingTest, AProcessIsBoundedByItsCapAndEvictionsAreCounted) {
  FlightRing ring({.window_ns = 100 * kSecond, .max_process_events = 300, .max_total_events = 1000});
  for (uint64_t i = 0; i < 1000; i++) ring.Push(At(1, kSecond + i), kSecond + i);
  const FlightRingStats s = ring.stats();
  EXPECT_EQ(s.events, 300u);
  EXPECT_EQ(s.evicted, 700u);
  EXPECT_EQ(s.aged_out, 0u);
  EXPECT_LE(s.capacity, 300u);  // memory is the cap, not more
  EXPECT_EQ(ring.ProcessStats(1).evicted, 700u);
  EXPECT_EQ(ring.EvictedSince(1, kSecond), 700u);  // all of them of second 1
  EXPECT_EQ(ring.EvictedSince(1, 2 * kSecond), 0u);
  std::deque<Event> out;
  ring.CopySince(1, 0, out);
  ASSERT_EQ(out.size(), 300u);
  EXPECT_EQ(out.front().ts_ns, kSecond + 700);  // the oldest went
  EXPECT_EQ(out.back().ts_ns, kSecond + 999);
}

TEST(FlightRingTest, TheTotalIsBoundedAndANewProcessIsNotStarved) {
  FlightRing ring({.window_ns = 100 * kSecond, .max_process_events = 1024, .max_total_events = 1024});
  for (uint64_t i = 0; i < 5000; i++) ring.Push(At(1, kSecond + i), kSecond + i);
  EXPECT_EQ(ring.stats().capacity, 1024u);
  // A second process takes room from the first, which is halved, its oldest evicted.
  for (uint64_t i = 0; i < 5000; i++) ring.Push(At(2, kSecond + i), kSecond + i);
  const FlightRingStats s = ring.stats();
  EXPECT_LE(s.capacity, 1024u);
  EXPECT_LE(s.events, 1024u);
  EXPECT_GE(ring.ProcessStats(2).events, 256u);
  EXPECT_GE(ring.ProcessStats(1).events, 256u);
  EXPECT_EQ(s.pushed, s.events + s.evicted + s.aged_out);  // every event accounted for
  // A forgotten process gives its memory back.
  ring.Forget(1);
  EXPECT_EQ(ring.stats().events, ring.ProcessStats(2).events);
  EXPECT_EQ(ring.stats().processes, 1u);
  EXPECT_TRUE(Times(ring, 1).empty());
}

TEST(FlightRingTest, AnEventIsReachableBySequenceUntilItLeaves) {
  FlightRing ring({.window_ns = 100 * kSecond, .max_process_events = 4, .max_total_events = 4});
  const uint64_t first = ring.Push(At(1, kSecond, 11), kSecond);
  ASSERT_NE(ring.At(1, first), nullptr);
  EXPECT_EQ(ring.At(1, first)->ref, 11u);
  for (int i = 0; i < 4; i++) ring.Push(At(1, kSecond), kSecond);
  EXPECT_EQ(ring.At(1, first), nullptr);
  EXPECT_EQ(ring.At(2, 0), nullptr);
}

// A process the agent follows for days sends a clock pair a second: past
// GpuClock::kMaxSnapshots the flight recorder's clock drops the oldest half
// and still converts its last seconds' records with the latest pairs.
TEST(FlightRingTest, TheClockOfALongRunningProcessKeepsItsRecentPairs) {
  const uint64_t n = GpuClock::kMaxSnapshots + 10;
  auto feed = [n](GpuClock& clock) {
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t offset = i < GpuClock::kMaxSnapshots ? 1000 : 2000;  // CUPTI's clock stepped
      clock.OnSnapshot(5, i * kSecond + offset, i * kSecond, i * kSecond);
    }
  };
  GpuClock whole, recent;
  recent.KeepRecentOnly();
  feed(whole);
  feed(recent);
  const uint64_t last = (n - 1) * kSecond;
  EXPECT_EQ(whole.Alignment(5).rejected, 10u);  // record's: every pair of the recording kept, the rest refused
  EXPECT_EQ(whole.ToMonotonic(5, last + 2000), last + 1000);
  EXPECT_EQ(recent.Alignment(5).rejected, 0u);
  EXPECT_EQ(recent.ToMonotonic(5, last + 2000), last);
}

// A pipeline's tables with one Python stack per process.
struct Tables {
  StackTable stacks;
  FrameTable frames;
  StackId Stack(pid_t pid, const std::vector<std::string>& names) {
    StackInfo info;
    info.pid = pid;
    info.domain = GF_DOMAIN_CPU;
    std::string key = std::to_string(pid) + ":";
    for (const std::string& name : names) {
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kPython;
      f.name = name;
      f.file = "train.py";
      f.line = 1;
      info.frames.push_back(frames.Intern(f));
      key += name + ";";
    }
    return stacks.Insert(key, std::move(info));
  }
};

TEST(FlightRingTest, ASnapshotIsOneProcessesWindowWithWhatIsStillOpen) {
  Tables t;
  constexpr pid_t kA = 100, kB = 200;
  const StackId a = t.Stack(kA, {"<module>", "Trainer > step"});
  const StackId b = t.Stack(kB, {"<module>", "serve"});
  FlightRing ring({.window_ns = 2 * kSecond, .max_process_events = 1000, .max_total_events = 1000});
  TimelineOptions o;
  o.sample_period_ns = 10'000'000;
  Timeline tl(t.stacks, t.frames, o, &ring);
  const uint64_t T = 1000 * kSecond;
  // Process A samples for 5 s (its root frame open all along), allocates
  // each second, and enters an NCCL call at 4 s that has not returned.
  for (uint64_t ms = 0; ms <= 5000; ms += 10) tl.OnCpuSample(kA, kA, T + ms * 1'000'000, a);
  for (uint64_t s = 0; s <= 5; s++)
    tl.OnMemory(kA, kA, T + s * kSecond, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x1000 + s, 1 << 20, a, 1 << 20);
  tl.OnNcclCall(kA, kA + 1, T + 2 * kSecond, GF_API_NCCL_ALL_REDUCE, 0xc0, 4 << 20, -1, 7, a);
  // Process B: one allocation, which A's trace must not show.
  tl.OnCpuSample(kB, kB, T + 4 * kSecond, b);
  tl.OnMemory(kB, kB, T + 4 * kSecond, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x9000, 1 << 20, b, 1 << 20);

  const uint32_t pids[] = {static_cast<uint32_t>(kA)};
  const uint64_t now = T + 5 * kSecond + 5'000'000;
  std::deque<Event> snap = tl.Snapshot(pids, now - 2 * kSecond, now);
  int memory = 0, calls = 0, spans = 0;
  for (const Event& e : snap) {
    EXPECT_EQ(e.pid, static_cast<uint32_t>(kA));
    EXPECT_GE(e.end_ns, now - 2 * kSecond);
    if (e.type == EventType::kMemory) memory++;
    if (e.type == EventType::kStackSpan) {
      spans++;
      EXPECT_EQ(e.ts_ns, now - 2 * kSecond) << "the root frame, open since T, is cut at the window";
    }
    if (e.type == EventType::kCall) {
      calls++;
      EXPECT_EQ(e.ts_ns, T + 2 * kSecond) << "the stuck call is whole, older than the window";
      EXPECT_EQ(e.end_ns, now);
      EXPECT_EQ(e.flags, kCallUnfinished);
    }
  }
  EXPECT_EQ(memory, 2);  // 4 s and 5 s (3.005 s and later)
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(spans, 2);  // <module> and Trainer > step, still open

  exporters::ChromeTraceOptions co;
  co.events = &snap;
  co.metadata = "\"flight_recorder\":{\"seconds\":2}";
  co.missing = 3;
  exporters::ChromeTraceStats stats;
  const nlohmann::json doc = nlohmann::json::parse(exporters::ChromeTraceJson(tl, co, &stats));
  CheckTraceSchema(doc);
  EXPECT_EQ(doc["metadata"]["flight_recorder"]["seconds"], 2);
  bool note = false;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e.contains("pid") && e["pid"] != 0) {
      EXPECT_EQ(e["pid"], kA) << e.dump();
    }
    if (e.value("name", "").find("3 events are not in this trace") != std::string::npos) note = true;
  }
  EXPECT_TRUE(note) << doc.dump();

  // Retired: nothing of A is left, and B's events are untouched.
  const pid_t gone[] = {kA};
  const StackId stacks[] = {a};
  tl.ForgetProcesses(gone, stacks);
  EXPECT_TRUE(tl.Snapshot(pids, 0, now).empty());
  const uint32_t b_only[] = {static_cast<uint32_t>(kB)};
  EXPECT_FALSE(tl.Snapshot(b_only, 0, now).empty());
}

}  // namespace
}  // namespace gpuflame::profiler::timeline

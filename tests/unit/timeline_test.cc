// The timeline's collector (profiler/timeline) and its Chrome trace writer
// (exporters/trace): spans merged from samples, the GPU clock's alignment,
// flows, counters, limits, and a schema check of every event written.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/trace/chrome_trace.h"
#include "profiler/timeline/gpu_clock.h"
#include "profiler/timeline/stack_spans.h"
#include "profiler/timeline/timeline.h"
#include "tests/support/trace_schema.h"

namespace gpuflame::profiler::timeline {
namespace {

using nlohmann::json;

std::vector<StackSpan> Merge(const std::vector<std::pair<uint64_t, std::vector<uint32_t>>>& samples, uint64_t period) {
  std::vector<StackSpan> out;
  StackSpans spans(period, [&](const StackSpan& s) { out.push_back(s); });
  for (const auto& [ts, ids] : samples) {
    std::vector<SampledFrame> frames;
    for (uint32_t id : ids) frames.push_back({id, id * 10});  // frame = identity * 10: which one names the span
    spans.OnSample(1, ts, frames);
  }
  spans.EndAll();
  return out;
}

std::string Describe(const std::vector<StackSpan>& spans) {
  std::string s;
  for (const StackSpan& x : spans)
    s += std::to_string(x.frame) + "@" + std::to_string(x.depth) + "[" + std::to_string(x.start_ns) + "," +
         std::to_string(x.end_ns) + ") ";
  return s;
}

TEST(StackSpansTest, SamplesSharingFramesMergeIntoNestedSpans) {
  // a>b>c, a>b>d, a>e, then the recording ends one period after the last.
  auto spans = Merge({{0, {1, 2, 3}}, {10, {1, 2, 4}}, {20, {1, 5}}}, 10);
  EXPECT_EQ(Describe(spans), "30@2[0,10) 40@2[10,20) 20@1[0,20) 50@1[20,30) 10@0[0,30) ");
}

TEST(StackSpansTest, AFrameOfOneFunctionAtAnotherLineStaysOneSpan) {
  std::vector<StackSpan> out;
  StackSpans spans(10, [&](const StackSpan& s) { out.push_back(s); });
  const SampledFrame line3{7, 70}, line4{7, 71};  // one function, two lines
  spans.OnSample(1, 0, std::vector<SampledFrame>{line3});
  spans.OnSample(1, 10, std::vector<SampledFrame>{line4});
  spans.EndAll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].frame, 70u);  // named by the first sample's frame
  EXPECT_EQ(out[0].end_ns, 20u);
}

TEST(StackSpansTest, AThreadOffCpuEndsItsSpansOnePeriodAfterItsLastSample) {
  // 4 periods without a sample is a gap: the thread slept.
  auto spans = Merge({{0, {1}}, {10, {1}}, {100, {1}}}, 10);
  EXPECT_EQ(Describe(spans), "10@0[0,20) 10@0[100,110) ");
  // A tick or two missed is not.
  EXPECT_EQ(Describe(Merge({{0, {1}}, {30, {1}}}, 10)), "10@0[0,40) ");
}

TEST(StackSpansTest, ThreadsAreApartAndLateSamplesAreCounted) {
  std::vector<StackSpan> out;
  StackSpans spans(10, [&](const StackSpan& s) { out.push_back(s); });
  const std::vector<SampledFrame> a{{1, 1}}, b{{2, 2}};
  spans.OnSample(1, 20, a);
  spans.OnSample(2, 0, b);   // another thread: its own time
  spans.OnSample(1, 15, b);  // older than thread 1's last: taken at it
  EXPECT_EQ(spans.reordered(), 1u);
  spans.EndThread(2);
  spans.EndAll();
  EXPECT_EQ(Describe(out), "1@0[20,20) 2@0[0,10) 2@0[20,30) ");
}

TEST(StackSpansTest, ASampleFromBeforeAnEndedThreadsEndIsLeftOut) {
  std::vector<StackSpan> out;
  StackSpans spans(10, [&](const StackSpan& s) { out.push_back(s); });
  const std::vector<SampledFrame> wait{{1, 1}, {2, 2}}, exit{{1, 1}, {3, 3}};
  spans.OnSample(1, 0, wait);
  spans.EndThread(1);  // its spans end at 10
  // Its last sample, crossed in the ring with its exit: it would reopen the
  // root over the span just ended (a reader sees "_Exit" begin inside
  // "wait4"). Left out, counted; so is an exact stack as late.
  spans.OnSample(1, 5, exit);
  spans.OnExactStack(1, 9, exit);
  EXPECT_EQ(spans.after_end(), 2u);
  EXPECT_EQ(spans.reordered(), 0u);
  // A thread of the same ID after that end is a new one.
  spans.OnSample(1, 40, exit);
  spans.OnSample(1, 45, exit);  // and its own samples are not held to the old end
  spans.EndAll();
  EXPECT_EQ(Describe(out), "2@1[0,10) 1@0[0,10) 3@1[40,55) 1@0[40,55) ");
  EXPECT_EQ(spans.after_end(), 2u);
}

TEST(StackSpansTest, AnExactStackIsASampleInOrderAndLeftOutLate) {
  std::vector<StackSpan> out;
  StackSpans spans(10, [&](const StackSpan& s) { out.push_back(s); });
  const std::vector<SampledFrame> load{{1, 1}}, step{{2, 2}};
  spans.OnSample(1, 0, load);
  spans.OnSample(1, 10, load);
  // The thread waited for a CPU from 10 to 70; a launch under load at 65
  // shows it still loading: that span ends at the next sample, not one
  // period after the last.
  spans.OnExactStack(1, 65, load);
  spans.OnExactStack(1, 60, step);  // older than the thread's last: left out
  EXPECT_EQ(spans.exact_late(), 1u);
  EXPECT_EQ(spans.reordered(), 0u);
  spans.OnSample(1, 70, step);
  spans.EndAll();
  EXPECT_EQ(Describe(out), "1@0[0,20) 1@0[65,70) 2@0[70,80) ");
}

TEST(StackSpansTest, ThreadsAreBoundedIdleOnesEndedFirst) {
  size_t spans_out = 0;
  StackSpans spans(10, [&](const StackSpan&) { spans_out++; });
  const std::vector<SampledFrame> f{{1, 1}};
  for (uint64_t t = 0; t < StackSpans::kMaxThreads; t++) spans.OnSample(t, 0, f);
  spans.OnSample(StackSpans::kMaxThreads, 5, f);  // all still active: left out, counted
  EXPECT_EQ(spans.over_threads(), 1u);
  EXPECT_EQ(spans_out, 0u);
  spans.OnSample(StackSpans::kMaxThreads, 1000, f);  // all idle for a gap: ended, room made
  EXPECT_EQ(spans.over_threads(), 1u);
  EXPECT_EQ(spans_out, StackSpans::kMaxThreads);
  EXPECT_EQ(spans.open_threads(), 1u);
}

TEST(GpuClockTest, ConvertsThroughTheSnapshotsAroundIt) {
  GpuClock clock;
  EXPECT_FALSE(clock.ToMonotonic(5, 123).has_value());  // no snapshot: no conversion
  // CUPTI's clock 1e9 ahead; between the snapshots it gains 1000 ns.
  clock.OnSnapshot(5, 1'000'001'000, 900, 1100);              // offset 1e9 (read at 1000 +- 100)
  clock.OnSnapshot(5, 1'000'011'000 + 1000, 10'900, 11'100);  // offset 1e9 + 1000
  EXPECT_EQ(*clock.ToMonotonic(5, 1'000'001'000), 1000u);
  EXPECT_EQ(*clock.ToMonotonic(5, 1'000'006'500), 6000u);    // halfway: half the gain
  EXPECT_EQ(*clock.ToMonotonic(5, 1'000'000'000), 0u);       // before the first: its offset
  EXPECT_EQ(*clock.ToMonotonic(5, 1'000'022'000), 21'000u);  // after the last: its offset
  // The inverse, for the probes' times (profiler/utilization's sync waits).
  EXPECT_FALSE(clock.ToCupti(6, 123).has_value());
  EXPECT_EQ(*clock.ToCupti(5, 1000), 1'000'001'000u);
  EXPECT_EQ(*clock.ToCupti(5, 6000), 1'000'006'500u);
  EXPECT_EQ(*clock.ToCupti(5, 0), 1'000'000'000u);
  EXPECT_EQ(*clock.ToCupti(5, 21'000), 1'000'022'000u);
  for (uint64_t m : {1000u, 3333u, 6000u, 10'999u}) EXPECT_EQ(*clock.ToMonotonic(5, *clock.ToCupti(5, m)), m);
  const ClockAlignment a = clock.Alignment(5);
  EXPECT_EQ(a.snapshots, 2u);
  EXPECT_EQ(a.max_uncertainty_ns, 100u);
  EXPECT_EQ(a.max_step_ns, 1000u);
  // The workload's numbers: a bracket backwards or over 1 ms, time going back.
  clock.OnSnapshot(5, 2'000'000'000, 20'000, 10'000);
  clock.OnSnapshot(5, 2'000'000'000, 20'000, 20'000 + GpuClock::kMaxBracketNs + 1);
  clock.OnSnapshot(5, 1'000'000'000, 30'000, 30'010);
  EXPECT_EQ(clock.Alignment(5).rejected, 3u);
  EXPECT_EQ(clock.Alignment(5).snapshots, 2u);
}

// A pipeline's tables with a few Python stacks in them.
struct Tables {
  StackTable stacks;
  FrameTable frames;
  StackId Stack(pid_t pid, const std::vector<std::pair<std::string, int>>& names, uint8_t domain = GF_DOMAIN_CPU) {
    StackInfo info;
    info.pid = pid;
    info.domain = domain;
    std::string key = std::to_string(pid) + ":";
    for (const auto& [name, line] : names) {
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kPython;
      f.name = name;
      f.file = "train.py";
      f.line = line;
      info.frames.push_back(frames.Intern(f));
      key += name + "@" + std::to_string(line) + ";";
    }
    return stacks.Insert(key, std::move(info));
  }
};

json Parse(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << text;
  return doc;
}

std::vector<json> Events(const json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

gf_kernel_record Kernel(uint64_t start, uint64_t end, uint32_t correlation, uint32_t name_id) {
  gf_kernel_record r{};
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = correlation;
  r.name_id = name_id;
  r.device = 1;
  r.stream = 7;
  r.kind = GF_GPU_KERNEL;
  r.weight = 1;
  return r;
}

// A CUDA call the library sent as a span (gf_api_record).
gf_api_record ApiCall(uint32_t tid, uint64_t start, uint64_t end, uint32_t correlation, uint16_t cbid, uint8_t domain,
                      uint32_t result = 0) {
  gf_api_record r{};
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = correlation;
  r.tid = tid;
  r.cbid = cbid;
  r.domain = domain;
  r.result = result;
  return r;
}

TEST(ChromeTraceTest, AStepOnOneThreadWithItsMemoryLaunchesAndKernels) {
  Tables t;
  constexpr pid_t kPid = 4242;
  constexpr uint32_t kTid = 4243;
  // Trainer > step at two lines: one span.
  const StackId step1 = t.Stack(kPid, {{"<module>", 1}, {"Trainer > step", 10}});
  const StackId step2 = t.Stack(kPid, {{"<module>", 1}, {"Trainer > step", 11}, {"matmul", 3}});
  const StackId load = t.Stack(kPid, {{"<module>", 1}, {"DataLoader > __next__", 5}});
  TimelineOptions o;
  o.sample_period_ns = 10'000;
  o.marks = {"Trainer > step", "DataLoader > __next__"};
  Timeline tl(t.stacks, t.frames, o);
  const uint64_t T = 1'000'000'000;  // CLOCK_MONOTONIC of the first sample
  tl.OnCpuSample(kPid, kTid, T, load);
  tl.OnCpuSample(kPid, kTid, T + 10'000, step1);
  tl.OnCpuSample(kPid, kTid, T + 20'000, step2);
  tl.OnCpuSample(kPid, kTid, T + 30'000, step1);
  tl.OnMemory(kPid, kTid, T + 12'000, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0xa000, 4096, step1, 4096);
  tl.OnMemory(kPid, kTid, T + 33'000, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0xa000, -4096, StackTable::kNone, 0);
  tl.OnLaunch(kPid, kTid, T + 21'000, 77, 211, step2);
  // CUPTI's clock is 5 s ahead of the monotonic one; the kernel runs 2 us
  // after its launch, for 3 us; a kernel of an unsampled launch follows.
  constexpr uint64_t kAhead = 5'000'000'000;
  tl.OnClock(kPid, T + kAhead, T - 50, T + 50);
  tl.OnKernelName(kPid, 3, "_Z6matmulv");
  const gf_kernel_record k[] = {Kernel(T + kAhead + 23'000, T + kAhead + 26'000, 77, 3),
                                Kernel(T + kAhead + 26'000, T + kAhead + 27'000, 78, 3)};
  tl.OnGpuRecords(kPid, k);
  tl.Finish(UINT64_MAX);

  exporters::ChromeTraceOptions co;
  co.process_names[kPid] = "train.py";
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, co, &stats));
  CheckTraceSchema(doc);
  EXPECT_EQ(doc["metadata"]["ts_zero_ns"], T);

  // The stack: <module> over all, one Trainer > step span (two lines, one call).
  std::map<std::string, std::pair<double, double>> cpu;  // name -> ts, dur (the last such span)
  int steps = 0;
  for (const TraceSpan& e : TraceSpans(doc, "cpu")) {
    EXPECT_EQ(e.tid, kTid);
    cpu[e.name] = {e.ts, e.dur};
    steps += e.name == "Trainer > step";
  }
  EXPECT_EQ(steps, 1);
  // Each ends a nanosecond before the sample that no longer shows it
  // (chrome_trace.cc says why), or one period after the last sample.
  auto expect_span = [&](const std::string& name, double ts, double dur) {
    EXPECT_EQ(cpu[name].first, ts) << name;
    EXPECT_NEAR(cpu[name].second, dur, 1e-9) << name;
  };
  expect_span("<module>", 0, 39.999);
  expect_span("DataLoader > __next__", 0, 9.999);
  expect_span("Trainer > step", 10, 29.999);
  expect_span("matmul", 20, 9.999);

  // Phases: only the marked frames, on a track of their own.
  std::vector<TraceSpan> phases = TraceSpans(doc, "phase");
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].name, "DataLoader > __next__");
  EXPECT_EQ(phases[1].name, "Trainer > step");
  EXPECT_EQ(phases[1].ts, 10.0);
  EXPECT_NEAR(phases[1].dur, 29.999, 1e-9);
  EXPECT_NE(phases[0].tid, kTid);
  std::map<uint64_t, std::string> thread_names;
  for (const json& e : Events(doc, "M"))
    if (e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
  EXPECT_EQ(thread_names[phases[0].tid], "phases: thread 4243");
  EXPECT_EQ(thread_names[kTid], "thread 4243");

  // Memory: instants with bytes and stack, and the counter after each.
  std::vector<json> mem = Events(doc, "i", "memory");
  ASSERT_EQ(mem.size(), 2u);
  EXPECT_EQ(mem[0]["name"], "tensor alloc");
  EXPECT_EQ(mem[0]["ts"], 12.0);
  EXPECT_EQ(mem[0]["args"]["bytes"], 4096);
  EXPECT_EQ(mem[0]["args"]["level"], "tensor");
  EXPECT_EQ(mem[0]["args"]["address"], "0xa000");
  EXPECT_EQ(mem[0]["args"]["stack"], "<module>;Trainer > step");
  EXPECT_EQ(mem[1]["name"], "tensor free");
  EXPECT_EQ(mem[1]["args"]["bytes"], 4096);
  EXPECT_FALSE(mem[1]["args"].contains("stack"));
  std::vector<json> counters;
  for (const json& e : Events(doc, "C"))
    if (e["name"].get<std::string>().starts_with("GPU memory in use")) counters.push_back(e);
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0]["name"], "GPU memory in use: tensor level");
  EXPECT_EQ(counters[0]["args"]["bytes"], 4096);
  EXPECT_EQ(counters[1]["args"]["bytes"], 0);

  // The launch, named by its kernel, with an arrow to it; the kernel on the
  // host's axis (CUPTI's clock converted), on its device's stream.
  std::vector<json> launches = Events(doc, "X", "launch");
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0]["name"], "launch: matmul()");
  EXPECT_EQ(launches[0]["ts"], 21.0);
  EXPECT_EQ(launches[0]["dur"], 0);
  EXPECT_EQ(launches[0]["args"]["stack"], "<module>;Trainer > step;matmul");
  EXPECT_EQ(launches[0]["flow_out"], true);
  std::vector<TraceSpan> gpu = TraceSpans(doc, "gpu");
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(gpu[0].name, "matmul()");
  EXPECT_EQ(gpu[0].ts, 23.0);
  EXPECT_EQ(gpu[0].dur, 3.0);
  EXPECT_EQ(gpu[0].begin["args"]["device"], 1);
  EXPECT_EQ(gpu[0].begin["bind_id"], launches[0]["bind_id"]);
  EXPECT_EQ(gpu[0].begin["flow_in"], true);
  EXPECT_FALSE(gpu[1].begin.contains("bind_id"));  // its launch was not sampled
  EXPECT_EQ(thread_names[gpu[0].tid], "GPU 1 stream 7");
  EXPECT_EQ(stats.flows, 1u);
  EXPECT_EQ(stats.gpu_without_launch, 1u);
  EXPECT_EQ(doc["metadata"]["gpu_clock"][0]["max_uncertainty_ns"], 50);
  std::map<uint64_t, std::string> processes;
  for (const json& e : Events(doc, "M"))
    if (e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
  EXPECT_EQ(processes[kPid], "train.py");
  EXPECT_EQ(processes[0], "GPUs (busy: kernels of the recorded processes)");
}

// CUDA synchronise calls and NCCL calls: exact spans, entry to return, on a
// track of their own beside their thread's (they do not nest with its
// sampled spans), named by the API, with their stacks and arguments; a
// synchronise inside an NCCL call nests in it; a call with no return ends
// with its process, said unfinished; one still in flight when the recording
// stops ends there.
TEST(ChromeTraceTest, SynchroniseAndNcclCallsAreExactSpansOnTheirThreadsCallTrack) {
  Tables t;
  // Above the kernel's PID_MAX_LIMIT: no real thread's name in /proc
  // (on one machine pid 100 was the kernel's damon-regions).
  constexpr pid_t kRank0 = 4'194'401, kRank1 = 4'194'501;
  const StackId reduce = t.Stack(kRank0, {{"Trainer > step", 1}, {"Comm > all_reduce", 2}});
  const StackId sync = t.Stack(kRank0, {{"Trainer > step", 1}, {"Trainer > log", 3}});
  const StackId send = t.Stack(kRank1, {{"Comm > send", 4}});
  const StackId bcast = t.Stack(kRank1, {{"Comm > broadcast", 5}});
  TimelineOptions o;
  o.sample_period_ns = 10'000;
  Timeline tl(t.stacks, t.frames, o);
  const uint64_t T = 1'000'000'000;
  tl.OnCpuSample(kRank0, kRank0, T, reduce);
  // Rank 0: an all-reduce of 1 MiB of float32 (datatype 7), with a stream
  // synchronise inside it, and later a device synchronise.
  tl.OnNcclCall(kRank0, kRank0, T + 1'000, GF_API_NCCL_ALL_REDUCE, 0xc0, 1 << 20, -1, 7, reduce);
  tl.OnSyncCall(kRank0, kRank0, T + 2'000, T + 5'000, GF_API_CUDA_STREAM_SYNC, 0x5000, reduce, 0);
  tl.OnNcclReturn(kRank0, kRank0, T + 8'000, 0);
  tl.OnSyncCall(kRank0, kRank0, T + 20'000, T + 26'000, GF_API_CUDA_DEVICE_SYNC, 0, sync, 0);
  // Rank 1: a send to rank 0 that never returns (the process is killed),
  // then a broadcast from root 0 in flight when the recording stops.
  tl.OnNcclCall(kRank1, kRank1, T + 3'000, GF_API_NCCL_SEND, 0xd0, 4 << 20, 0, 7, send);
  tl.OnProcessExit(kRank1, T + 30'000);
  tl.OnNcclReturn(kRank1, kRank1, T + 31'000, 0);  // after its exit: ignored
  tl.OnNcclCall(kRank1, kRank1 + 1, T + 32'000, GF_API_NCCL_BROADCAST, 0xd0, 256 << 10, 0, 7, bcast);
  tl.Finish(T + 40'000);
  EXPECT_EQ(tl.stats().kept[static_cast<size_t>(EventType::kCall)], 5u);

  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);
  std::map<uint64_t, std::string> thread_names;
  for (const json& e : Events(doc, "M"))
    if (e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];

  std::vector<TraceSpan> nccl = TraceSpans(doc, "nccl");
  ASSERT_EQ(nccl.size(), 3u);
  const TraceSpan& all_reduce = nccl[0];
  EXPECT_EQ(all_reduce.name, "ncclAllReduce");
  EXPECT_EQ(all_reduce.ts, 1.0);
  EXPECT_EQ(all_reduce.dur, 7.0);
  EXPECT_NE(all_reduce.tid, static_cast<uint64_t>(kRank0)) << "a track of its own";
  EXPECT_EQ(thread_names[all_reduce.tid], "CUDA/NCCL calls: thread 4194401");
  const json& a = all_reduce.begin["args"];
  EXPECT_EQ(a["bytes"], 1 << 20);
  EXPECT_EQ(a["datatype"], "float32");
  EXPECT_EQ(a["communicator"], "0xc0");
  EXPECT_EQ(a["result"], "ncclSuccess");
  EXPECT_FALSE(a.contains("peer"));
  EXPECT_FALSE(a.contains("unfinished"));
  EXPECT_EQ(a["stack"], "Trainer > step;Comm > all_reduce");

  const TraceSpan& killed = nccl[1];
  EXPECT_EQ(killed.name, "ncclSend");
  EXPECT_EQ(killed.ts, 3.0);
  EXPECT_EQ(killed.dur, 27.0) << "ended with its process";
  EXPECT_EQ(killed.begin["args"]["peer"], 0);
  EXPECT_EQ(killed.begin["args"]["bytes"], 4 << 20);
  EXPECT_TRUE(killed.begin["args"].contains("unfinished"));
  EXPECT_FALSE(killed.begin["args"].contains("result"));

  const TraceSpan& stopped = nccl[2];
  EXPECT_EQ(stopped.name, "ncclBroadcast");
  EXPECT_EQ(stopped.begin["args"]["root"], 0);
  EXPECT_EQ(stopped.dur, 8.0) << "ended with the recording";
  EXPECT_TRUE(stopped.begin["args"].contains("unfinished"));
  EXPECT_NE(stopped.tid, killed.tid) << "another thread, another track";

  std::vector<TraceSpan> cuda = TraceSpans(doc, "cuda");
  ASSERT_EQ(cuda.size(), 2u);
  EXPECT_EQ(cuda[0].name, "cudaStreamSynchronize");
  EXPECT_EQ(cuda[0].tid, all_reduce.tid) << "inside the all-reduce, on its track";
  EXPECT_EQ(cuda[0].ts, 2.0);
  EXPECT_EQ(cuda[0].dur, 3.0);
  EXPECT_EQ(cuda[0].begin["args"]["stream"], "0x5000");
  EXPECT_EQ(cuda[1].name, "cudaDeviceSynchronize");
  EXPECT_EQ(cuda[1].dur, 6.0);
  EXPECT_FALSE(cuda[1].begin["args"].contains("stream")) << "the whole device";
  EXPECT_EQ(cuda[1].begin["args"]["stack"], "Trainer > step;Trainer > log");
}

// A step's first allocation begins its phase, though its stack came (in a
// batch from the injection library) after two later CPU samples; an
// allocation whose stack has no Python frame does not end it; the phase
// ends exactly at the synchronise call after the step.
TEST(ChromeTraceTest, APhaseBeginsAtItsFirstAllocationThoughItsStackCameLate) {
  Tables t;
  constexpr pid_t kPid = 4242;
  constexpr uint32_t kTid = 4243;
  const StackId loop = t.Stack(kPid, {{"<module>", 1}, {"timed_steps", 5}});
  const StackId step = t.Stack(kPid, {{"<module>", 1}, {"timed_steps", 6}, {"Trainer > step", 10}});
  const StackId native = t.stacks.Insert("4242:native", {});  // no frame at all: a failed walk
  TimelineOptions o;
  o.sample_period_ns = 10'000'000;
  o.marks = {"Trainer > step"};
  Timeline tl(t.stacks, t.frames, o);
  const uint64_t T = 1'000'000'000, kMs = 1'000'000;
  tl.OnCpuSample(kPid, kTid, T, loop);
  tl.OnCpuSample(kPid, kTid, T + 10 * kMs, step);
  tl.OnCpuSample(kPid, kTid, T + 20 * kMs, step);
  // The batch: the step's first allocation at 1 ms, a stackless one at 2 ms.
  tl.OnMemory(kPid, kTid, T + 1 * kMs, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0xa000, 4096, step, 4096);
  tl.OnMemory(kPid, kTid, T + 2 * kMs, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0xb000, 4096, native, 8192);
  tl.OnSyncCall(kPid, kTid, T + 25 * kMs, T + 27 * kMs, GF_API_CUDA_DEVICE_SYNC, 0, loop, 0);
  tl.OnCpuSample(kPid, kTid, T + 30 * kMs, loop);
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);
  std::vector<TraceSpan> phases = TraceSpans(doc, "phase");
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0].name, "Trainer > step");
  EXPECT_EQ(phases[0].ts, 1000.0);  // us from the trace's start, T
  EXPECT_NEAR(phases[0].dur, 23999.999, 1e-6);
  EXPECT_EQ(doc["metadata"]["phase_stacks_late"], 0);
}

TEST(ChromeTraceTest, AGraphsKernelsChainOnOneArrowAndUncalibratedRecordsAreCounted) {
  Tables t;
  const StackId s = t.Stack(1, {{"run", 1}});
  Timeline tl(t.stacks, t.frames, {});
  tl.OnLaunch(1, 1, 1000, 9, 0, s);
  tl.OnClock(1, 1000, 999, 1001);
  const gf_kernel_record k[] = {Kernel(3000, 4000, 9, 1), Kernel(2000, 3000, 9, 1)};
  tl.OnGpuRecords(1, k);
  tl.OnGpuRecords(2, k);  // a process that sent no clock
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);
  std::vector<TraceSpan> gpu = TraceSpans(doc, "gpu");
  ASSERT_EQ(gpu.size(), 2u);
  EXPECT_EQ(gpu[0].name, "[kernel 1]");  // never announced
  EXPECT_EQ(gpu[0].ts, 1.0);             // 2000 on both clocks here; the trace starts at 1000
  EXPECT_TRUE(gpu[0].begin["flow_in"] == true && gpu[0].begin["flow_out"] == true);    // the first: a step
  EXPECT_TRUE(gpu[1].begin["flow_in"] == true && !gpu[1].begin.contains("flow_out"));  // the last: the end
  EXPECT_EQ(gpu[0].begin["bind_id"], gpu[1].begin["bind_id"]);
  EXPECT_EQ(stats.gpu_uncalibrated, 2u);
  EXPECT_EQ(doc["metadata"]["dropped"]["gpu_records_without_clock"], 2);
  // Said on the timeline itself.
  bool said = false;
  for (const json& e : Events(doc, "i", "gpuflame")) said |= e["s"] == "g";
  EXPECT_TRUE(said);
}

// Every launch, copy and memset call, entry to return, from the library
// (gf_api_record): exact spans on their thread's call track, named by the
// call and its GPU work, each with the arrow to that work; a sampled launch
// of the same call lends the span its stack and is not drawn again; a copy
// says its bytes and bandwidth; the calls the library had no room for are
// counted in the metadata.
TEST(ChromeTraceTest, CudaCallsAreExactSpansWithArrowsAndTheSampledLaunchesStacks) {
  Tables t;
  // Past any pid_max (2^22): no thread of this machine's lends its name.
  constexpr pid_t kPid = 4194305;
  constexpr uint32_t kTid = 78;
  const StackId s = t.Stack(kPid, {{"Trainer > step", 1}, {"forward", 2}});
  Timeline tl(t.stacks, t.frames, {});
  const uint64_t T = 1'000'000;
  tl.OnClock(kPid, T, T - 10, T + 10);  // CUPTI's clock is the host's here
  tl.OnKernelName(kPid, 5, "_Z4gemmv");
  tl.OnLaunch(kPid, kTid, T + 1'200, 301, 211, s);  // the sampled launch of call 301
  const gf_api_record calls[] = {ApiCall(kTid, T + 1'000, T + 4'000, 301, 211, 2),  // cudaLaunchKernel, sampled
                                 ApiCall(kTid, T + 5'000, T + 6'000, 302, 652, 1),  // cuLaunchKernelEx, not sampled
                                 ApiCall(kTid, T + 7'000, T + 9'000, 303, 41, 2)};  // cudaMemcpyAsync
  tl.OnApiCalls(kPid, calls, 3);
  gf_kernel_record copy = Kernel(T + 8'000, T + 10'000, 303, 0);
  copy.kind = GF_GPU_MEMCPY;
  copy.copy_kind = 1;  // HtoD
  copy.bytes = 40'000;
  const gf_kernel_record work[] = {Kernel(T + 4'500, T + 6'000, 301, 5), Kernel(T + 6'500, T + 7'500, 302, 5), copy};
  tl.OnGpuRecords(kPid, work);
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);

  EXPECT_TRUE(Events(doc, "X", "launch").empty());  // drawn as its call's span
  std::vector<json> api = Events(doc, "X", "cuda");
  ASSERT_EQ(api.size(), 3u);
  EXPECT_EQ(api[0]["name"], "cudaLaunchKernel: gemm()");
  EXPECT_EQ(api[0]["ts"], 0.0);  // the first event: the trace's zero
  EXPECT_EQ(api[0]["dur"], 3.0);
  EXPECT_EQ(api[0]["args"]["stack"], "Trainer > step;forward");
  EXPECT_EQ(api[0]["args"]["correlation"], 301);
  EXPECT_EQ(api[1]["name"], "cuLaunchKernelEx: gemm()");
  EXPECT_EQ(api[1]["args"]["stack"], "[not sampled: the thread's track above shows where it was]");
  EXPECT_EQ(api[2]["name"], "cudaMemcpyAsync: [memcpy HtoD] 39.1 KiB");
  EXPECT_EQ(api[2]["args"]["bytes"], 40'000);  // the copy's, on its call too
  std::map<uint64_t, std::string> thread_names;
  for (const json& e : Events(doc, "M"))
    if (e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
  for (const json& e : api) {
    EXPECT_EQ(thread_names[e["tid"]], "CUDA/NCCL calls: thread 78");
    EXPECT_EQ(e["flow_out"], true);
  }
  // Every GPU record has its arrow from its call.
  std::vector<TraceSpan> gpu = TraceSpans(doc, "gpu");
  ASSERT_EQ(gpu.size(), 3u);
  for (size_t i = 0; i < gpu.size(); i++) EXPECT_EQ(gpu[i].begin["bind_id"], api[i]["bind_id"]) << i;
  EXPECT_EQ(stats.flows, 3u);
  EXPECT_EQ(stats.gpu_without_launch, 0u);
  EXPECT_EQ(gpu[2].begin["args"]["bytes"], 40'000);
  EXPECT_EQ(gpu[2].begin["args"]["gb_per_s"], 20.0);  // 40 kB in 2 us
  EXPECT_EQ(doc["metadata"]["api_calls_dropped_in_process"], 3);
  EXPECT_EQ(doc["metadata"]["kept"]["api"], 3);
}

// A device allocation's or free's call (the library's span) and its eBPF
// memory event are one event: the span takes the event's bytes, address and
// stack, and the event is drawn as its counter only. Joined by thread and
// time: the last call of the event's direction begun before it, within the
// call plus a millisecond (a runtime call's own event comes at its return
// probe, after CUPTI's exit callback). A tensor event, an event outside any
// call, a call of the other direction and a second event in one call stay
// instants; host allocations have no event to join.
TEST(ChromeTraceTest, DeviceMemoryCallsAreSpansWithTheirAllocationsBytesAndStack) {
  Tables t;
  constexpr pid_t kPid = 91;
  constexpr uint32_t kTid = 92;
  const StackId s = t.Stack(kPid, {{"Trainer > load", 1}, {"cuda_malloc", 2}});
  Timeline tl(t.stacks, t.frames, {});
  const uint64_t T = 5'000'000;
  constexpr int64_t kMiB = 1 << 20;
  const gf_api_record calls[] = {
      ApiCall(kTid, T, T + 2'000, 1, 20, 2, 0),             // cudaMalloc: its driver event inside
      ApiCall(kTid, T + 10'000, T + 11'000, 2, 22, 2, 0),   // cudaFree: its event at its return probe, after
      ApiCall(kTid, T + 20'000, T + 21'000, 3, 20, 2, 2),   // cudaMalloc out of memory: no event
      ApiCall(kTid, T + 30'000, T + 31'000, 4, 27, 2, 0),   // cudaHostAlloc: not followed by the probes
      ApiCall(kTid, T + 40'000, T + 41'000, 5, 549, 1, 0),  // cuMemCreate: a handle
  };
  tl.OnApiCalls(kPid, calls, 0);
  tl.OnMemory(kPid, kTid, T + 1'500, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x7000, 16 * kMiB, s, 16 * kMiB);
  tl.OnMemory(kPid, kTid, T + 1'600, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 0x7000, 4 * kMiB, s, 4 * kMiB);
  tl.OnMemory(kPid, kTid, T + 11'004, GF_DOMAIN_GPU, GF_API_CUDA_FREE, 0x7000, -16 * kMiB, StackTable::kNone, 0);
  tl.OnMemory(kPid, kTid, T + 41'000, GF_DOMAIN_GPU, GF_API_CU_MEM_CREATE, 0x1001, 2 * kMiB, s, 2 * kMiB);
  tl.OnMemory(kPid, kTid, T + 41'001, GF_DOMAIN_GPU, GF_API_CU_MEM_CREATE, 0x1002, 2 * kMiB, s, 4 * kMiB);
  tl.OnMemory(kPid, kTid, T + 45'000'000, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x9000, kMiB, s, 5 * kMiB);
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);

  std::vector<json> api = Events(doc, "X", "cuda");
  ASSERT_EQ(api.size(), 5u);
  EXPECT_EQ(api[0]["name"], "cudaMalloc 16.0 MiB");
  EXPECT_EQ(api[0]["dur"], 2.0);
  EXPECT_EQ(api[0]["args"]["bytes"], 16 * kMiB);
  EXPECT_EQ(api[0]["args"]["level"], "device");
  EXPECT_EQ(api[0]["args"]["address"], "0x7000");
  EXPECT_EQ(api[0]["args"]["stack"], "Trainer > load;cuda_malloc");
  EXPECT_EQ(api[1]["name"], "cudaFree 16.0 MiB");
  EXPECT_EQ(api[1]["args"]["bytes"], 16 * kMiB);
  EXPECT_EQ(api[1]["args"]["stack"], "[a free takes no stack: the thread's track above shows where it was]");
  EXPECT_EQ(api[2]["name"], "cudaMalloc");            // failed: nothing allocated, its result says why
  EXPECT_EQ(api[2]["args"]["result"], 2);
  EXPECT_FALSE(api[2]["args"].contains("bytes"));
  EXPECT_EQ(api[3]["name"], "cudaHostAlloc");
  EXPECT_EQ(api[4]["name"], "cuMemCreate 2.0 MiB");
  // Left as instants: the tensor, the second handle in one call, the late one.
  std::vector<json> instants = Events(doc, "i", "memory");
  ASSERT_EQ(instants.size(), 3u);
  EXPECT_EQ(instants[0]["name"], "tensor alloc");
  EXPECT_EQ(instants[1]["name"], "cuMemCreate");
  EXPECT_EQ(instants[1]["args"]["address"], "0x1002");
  EXPECT_EQ(instants[2]["name"], "cudaMalloc");
  // Every event's counter is still drawn: six memory events, six counters.
  int counters = 0;
  for (const json& e : Events(doc, "C"))
    if (e["name"].get<std::string>().rfind("GPU memory in use: ", 0) == 0) counters++;
  EXPECT_EQ(counters, 6);
  EXPECT_EQ(stats.memory_calls_joined, 3u);
  EXPECT_EQ(doc["metadata"]["memory_calls_joined"], 3);
}

TEST(ChromeTraceTest, EachGpusBusyFractionPerMillisecondFromItsKernels) {
  Tables t;
  Timeline tl(t.stacks, t.frames, {});
  tl.OnClock(1, 1000, 999, 1001);  // CUPTI's clock is the monotonic one here
  constexpr uint64_t kMs = 1'000'000, T = 1000;
  gf_kernel_record k[] = {Kernel(T, T + 5 * kMs, 1, 1), Kernel(T + 3 * kMs, T + 6 * kMs, 2, 1),  // overlap: once
                          Kernel(T + 10 * kMs, T + 11 * kMs + kMs / 2, 3, 1)};
  for (gf_kernel_record& r : k) r.device = 2;
  tl.OnGpuRecords(1, k);
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);
  std::vector<std::pair<double, double>> busy;  // ts (us), fraction
  for (const json& e : Events(doc, "C")) {
    EXPECT_EQ(e["name"], "GPU 2 busy");
    EXPECT_EQ(e["pid"], 0);
    busy.push_back({e["ts"], e["args"]["fraction"]});
  }
  // Busy from 0 to 6 ms, idle to 10, busy to 11.5 (the last bin: 0.5 ms of 0.5), then nothing.
  EXPECT_EQ(busy, (std::vector<std::pair<double, double>>{{0, 1}, {6000, 0}, {10000, 1}, {12000, 0}}));
}

// Work on one stream that overlaps (Hopper's programmatic dependent launch:
// a split-K GEMM's reduce starts before the GEMM ends) goes on a track of
// its own below the stream's, so every track's begins and ends nest and
// each kernel keeps its exact duration; work after both is on the stream's
// own track again.
TEST(ChromeTraceTest, OverlappingWorkOnAStreamTakesATrackBelowItAndKeepsItsDuration) {
  Tables t;
  Timeline tl(t.stacks, t.frames, {});
  tl.OnClock(1, 1000, 999, 1001);
  tl.OnKernelName(1, 1, "nvjet_sm90_tst_128x64");
  tl.OnKernelName(1, 2, "splitKreduce_kernel");
  const gf_kernel_record k[] = {Kernel(10'000, 20'000, 1, 1), Kernel(19'800, 23'000, 2, 2),
                                Kernel(24'000, 25'000, 3, 1)};
  tl.OnGpuRecords(1, k);
  tl.Finish(UINT64_MAX);
  exporters::ChromeTraceStats stats;
  const json doc = Parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);  // every end the innermost span's
  std::map<uint64_t, std::string> track_names;
  for (const json& e : Events(doc, "M"))
    if (e["name"] == "thread_name") track_names[e["tid"]] = e["args"]["name"];
  std::vector<TraceSpan> gpu = TraceSpans(doc, "gpu");
  ASSERT_EQ(gpu.size(), 3u);
  EXPECT_EQ(gpu[0].name, "nvjet_sm90_tst_128x64");
  EXPECT_EQ(gpu[0].dur, 10.0);
  EXPECT_EQ(gpu[1].name, "splitKreduce_kernel");
  EXPECT_NEAR(gpu[1].dur, 3.2, 1e-9);
  EXPECT_EQ(track_names[gpu[0].tid], "GPU 1 stream 7");
  EXPECT_EQ(track_names[gpu[1].tid], "GPU 1 stream 7, overlapping work 1");
  EXPECT_EQ(gpu[2].tid, gpu[0].tid);
  EXPECT_EQ(stats.gpu_overlapping, 1u);
  EXPECT_EQ(doc["metadata"]["gpu_work_overlapping"], 1);
  EXPECT_EQ(doc["metadata"]["gpu_work_overlapping_beyond_tracks"], 0);
}

TEST(ChromeTraceTest, LimitsDropTheLatestEventsAndCountThem) {
  Tables t;
  const StackId s = t.Stack(1, {{"alloc_loop", 1}});
  TimelineOptions o;
  o.max_events = 50;
  Timeline tl(t.stacks, t.frames, o);
  for (int i = 0; i < 80; i++) tl.OnMemory(1, 1, 1000 + i, GF_DOMAIN_GPU, GF_API_CUDA_MALLOC, 0x1000 + i, 1, s, i + 1);
  tl.Finish(UINT64_MAX);
  EXPECT_EQ(tl.stats().kept[static_cast<size_t>(EventType::kMemory)], 50u);
  EXPECT_EQ(tl.stats().dropped[static_cast<size_t>(EventType::kMemory)], 30u);
  exporters::ChromeTraceOptions co;
  co.max_bytes = (64 << 10) + 2000;  // room for a few events past the reserve for the metadata
  exporters::ChromeTraceStats stats;
  const std::string text = exporters::ChromeTraceJson(tl, co, &stats);
  const json doc = Parse(text);
  CheckTraceSchema(doc);
  const uint64_t written = Events(doc, "i", "memory").size();
  EXPECT_GT(written, 0u);
  EXPECT_LT(written, 50u);
  EXPECT_EQ(written + stats.dropped_for_bytes[static_cast<size_t>(EventType::kMemory)], 50u);
  EXPECT_EQ(doc["metadata"]["dropped"]["over_max_events"]["memory"], 30);
  EXPECT_EQ(doc["metadata"]["dropped"]["over_max_bytes"]["memory"], 50 - written);
  EXPECT_LE(text.size(), co.max_bytes);
  // The earliest are kept: the instants are the first ones, in order.
  EXPECT_EQ(Events(doc, "i", "memory").back()["args"]["in_use"], written);
  EXPECT_EQ(Events(doc, "i", "memory").front()["name"], "cudaMalloc");
}

}  // namespace
}  // namespace gpuflame::profiler::timeline

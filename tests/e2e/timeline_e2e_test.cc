// record --timeline end to end: a Python workload (tests/workloads/
// timeline.py) on the simulated CUDA runtime and CUPTI (test fixture: its
// GPU stamps records with CLOCK_REALTIME, as CUPTI does, not the BPF clock),
// recorded by the real binary with real eBPF and the real injection library.
// The trace must hold exactly the workload's GPU work, memory events and
// phases, each GPU record arrowed from its launch and placed after it on the
// host's time axis; every event passes the schema check. What a browser
// makes of it: tests/deploy/timeline_browser_test.sh (speedscope).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.h"
#include "exporters/pprof/gzip.h"
#include "tests/support/trace_schema.h"

namespace gpuflame::e2e {
namespace {

using ::gpuflame::TraceSpan;
using ::gpuflame::TraceSpans;
using nlohmann::json;

const std::string kGemm = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(cutlass::gemm::kernel::Gemm::Params)";
constexpr int64_t kMiB = 1 << 20;

std::vector<json> Select(const json& doc, const std::string& ph, const std::string& cat) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == ph && e.value("cat", "") == cat) out.push_back(e);
  return out;
}

// Spans of |name| on the phase track grouped into calls: the workload
// sleeps 0.5 s between steps, so spans under 0.3 s apart are one call (a
// thread preempted for 4 sampling periods or more, as on a loaded CI
// machine, ends a span early, and its next sample or launch opens it again;
// 165 ms was seen under ctest's other job and three CPU hogs).
std::vector<std::pair<double, double>> Calls(const std::vector<TraceSpan>& phases, const std::string& name) {
  std::vector<std::pair<double, double>> calls;
  for (const TraceSpan& e : phases) {
    if (e.name != name) continue;
    const double ts = e.ts, end = e.ts + e.dur;
    if (!calls.empty() && ts - calls.back().second < 300'000) calls.back().second = end;
    else calls.push_back({ts, end});
  }
  return calls;
}

TEST(TimelineTest, StepsTheirMemoryLaunchesAndGpuWorkOnOneTimeAxis) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const std::string out = TempDir("timeline");
  // With --timeline, the command's library sends every launch and copy
  // call as a span (gf_api_record): every record has its arrow. Launch
  // stacks are sampled as ever; these few launches, within the start-up's
  // burst, all have theirs.
  RunResult r =
      Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --mark 'Trainer > step' --mark 'DataLoader > __next__' -o " + out +
         " -- " + PyenvPython("3.12") + " " + Workload("timeline.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  auto text = exporters::Gunzip(ReadFile(out + "/timeline.json.gz"));
  ASSERT_TRUE(text.ok()) << text.status();
  const json doc = json::parse(*text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  CheckTraceSchema(doc);

  // Tracks by name.
  std::map<uint64_t, std::string> threads;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];

  // The GPU's work, exactly: six gemms of 300 us on stream 7, three 8 us copies.
  std::vector<TraceSpan> gpu = TraceSpans(doc, "gpu");
  int gemms = 0, copies = 0;
  for (const TraceSpan& g : gpu) {
    if (g.name == kGemm) {
      gemms++;
      EXPECT_NEAR(g.dur, 300.0, 0.0015)
          << g.begin;  // microseconds as the fixture's GPU ran it (+-1 ns: the clock's rounding)
      EXPECT_EQ(threads[g.tid], "GPU 0 stream 7");
    } else if (g.name == "[memcpy HtoD]") {
      copies++;
      EXPECT_NEAR(g.dur, 8.0, 0.0015) << g.begin;
      EXPECT_EQ(threads[g.tid], "GPU 0 stream 0");
    } else {
      ADD_FAILURE() << "unexpected GPU work: " << g.begin;
    }
  }
  EXPECT_EQ(gemms, 6);
  EXPECT_EQ(copies, 3);
  // One after another on each stream, as the fixture's GPU ran them: the
  // clock's conversion keeps their order (none starts inside another).
  std::map<uint64_t, double> stream_free_at;
  for (const TraceSpan& g : gpu) {
    EXPECT_GE(g.ts, stream_free_at[g.tid]) << g.begin;
    stream_free_at[g.tid] = g.ts + g.dur;
  }

  // Each from its call, by arrow: the call's exact span on its thread's
  // call track (a sampled launch is drawn as its call, not again), the
  // launching stack's frames, and the work after the call's entry on the
  // host's axis (the GPU clock was aligned: unaligned, CLOCK_REALTIME is
  // decades away from the monotonic clock).
  EXPECT_TRUE(Select(doc, "X", "launch").empty());
  std::map<std::string, json> launches;
  for (const json& l : Select(doc, "X", "cuda"))
    if (l.contains("bind_id")) launches[l["bind_id"]] = l;
  for (const TraceSpan& span : gpu) {
    const json& g = span.begin;
    ASSERT_TRUE(g.contains("bind_id")) << g;
    ASSERT_TRUE(launches.contains(g["bind_id"])) << g;
    const json& l = launches[g["bind_id"]];
    // A copy's call says its bytes, in its name and its args.
    EXPECT_EQ(l["name"], span.name == kGemm ? "cudaLaunchKernel: " + span.name : "cudaMemcpy: " + span.name + " 8.0 MiB");
    if (span.name != kGemm) {
      EXPECT_EQ(l["args"]["bytes"], 8 * kMiB) << l;
    }
    EXPECT_EQ(threads[l["tid"]].rfind("CUDA/NCCL calls: ", 0), 0u) << threads[l["tid"]];
    EXPECT_GE(l["dur"].get<double>(), 0) << l;
    const std::string stack = l["args"]["stack"];
    EXPECT_NE(stack.find(span.name == kGemm ? "Trainer > step;launch" : "DataLoader > __next__;memcpy_htod"),
              std::string::npos)
        << stack;
    EXPECT_EQ(l["args"]["correlation"], g["args"]["correlation"]);
    const double after = span.ts - l["ts"].get<double>();
    EXPECT_GE(after, 0) << l << g;
    EXPECT_LT(after, 1e6) << l << g;  // within a second of its launch, on the same axis
  }

  // The device's busy fraction from its kernels: busy at times, idle at the end.
  std::vector<double> busy;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "GPU 0 busy") busy.push_back(e["args"]["fraction"]);
  ASSERT_FALSE(busy.empty());
  EXPECT_GT(*std::max_element(busy.begin(), busy.end()), 0.0);
  EXPECT_LE(*std::max_element(busy.begin(), busy.end()), 1.0);
  EXPECT_EQ(busy.back(), 0.0);

  // Memory, exactly: the weights at the device level, one 4 MiB tensor per
  // step, allocated in Trainer > step, and each process counter after it.
  std::vector<json> mem = Select(doc, "i", "memory");
  std::map<std::string, int> count;
  for (const json& m : mem) {
    count[m["name"]]++;
    if (m["name"] == "tensor alloc" || m["name"] == "tensor free") {
      EXPECT_EQ(m["args"]["bytes"], 4 * kMiB) << m;
    }
    if (m["name"] == "tensor alloc") {
      EXPECT_NE(m["args"]["stack"].get<std::string>().find("Trainer > step;empty"), std::string::npos) << m;
    }
  }
  EXPECT_EQ(count["tensor alloc"], 3);
  EXPECT_EQ(count["tensor free"], 3);
  // Device-level allocations and frees are their calls' exact spans (the
  // library's callbacks), with the eBPF event's bytes, address and stack,
  // not instants: the weights' and the caching allocator's segments'.
  EXPECT_EQ(count["cudaMalloc"] + count["cudaFree"] + count["cuMemAlloc_v2"] + count["cuMemFree_v2"], 0)
      << mem.size();
  std::vector<TraceSpan> memory_calls;
  for (const TraceSpan& c : TraceSpans(doc, "cuda"))
    if (c.name.rfind("cudaMalloc", 0) == 0 || c.name.rfind("cudaFree", 0) == 0) memory_calls.push_back(c);
  bool weights = false, freed = false;
  for (const TraceSpan& c : memory_calls) {
    const json& args = c.begin["args"];
    EXPECT_EQ(threads[c.tid].rfind("CUDA/NCCL calls: ", 0), 0u) << threads[c.tid];
    EXPECT_EQ(args["result"], 0) << c.begin;
    EXPECT_EQ(args["level"], "device") << c.begin;
    EXPECT_GE(c.dur, 0);
    weights |= c.name == "cudaMalloc 16.0 MiB" && args["bytes"] == 16 * kMiB &&
               args["stack"].get<std::string>().find("<module>;cuda_malloc") != std::string::npos;
    freed |= c.name == "cudaFree 16.0 MiB" && args["bytes"] == 16 * kMiB;
  }
  EXPECT_TRUE(weights) << memory_calls.size();
  EXPECT_TRUE(freed) << memory_calls.size();
  std::vector<int64_t> tensor_in_use;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "GPU memory in use: tensor level") tensor_in_use.push_back(e["args"]["bytes"]);
  EXPECT_EQ(tensor_in_use, (std::vector<int64_t>{4 * kMiB, 0, 4 * kMiB, 0, 4 * kMiB, 0}));

  // Phases: three calls of each, in turn, on the phases track; each step's
  // launches inside its call, each copy's inside a __next__.
  std::vector<TraceSpan> phases = TraceSpans(doc, "phase");
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(threads[phases[0].tid].rfind("phases: ", 0), 0u) << threads[phases[0].tid];
  const auto steps = Calls(phases, "Trainer > step");
  const auto loads = Calls(phases, "DataLoader > __next__");
  auto describe = [](const std::vector<std::pair<double, double>>& calls) {
    std::string out;
    for (const auto& [begin, end] : calls) out += " [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    return out;
  };
  ASSERT_EQ(steps.size(), 3u) << describe(steps);
  ASSERT_EQ(loads.size(), 3u) << describe(loads);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_LE(loads[i].first, steps[i].first);
    if (i + 1 < 3) {
      EXPECT_LT(steps[i].second, loads[i + 1].first);
    }
  }
  for (const auto& [id, l] : launches) {
    const bool gemm = l["name"] == "cudaLaunchKernel: " + kGemm;
    const auto& calls = gemm ? steps : loads;
    const double ts = l["ts"];
    EXPECT_TRUE(std::any_of(calls.begin(), calls.end(), [&](const auto& c) { return c.first <= ts && ts <= c.second; }))
        << l << "\ncalls:" << describe(calls);
  }

  // Each step's synchronise, an exact span from its entry to its return on
  // the thread's call track, with its stack, inside its step, after its
  // launches (it waits for their kernels).
  std::vector<TraceSpan> syncs;
  for (const TraceSpan& s : TraceSpans(doc, "cuda"))
    if (!launches.contains(s.begin.value("bind_id", "")) && s.name.find("Synchronize") != std::string::npos)
      syncs.push_back(s);
  ASSERT_EQ(syncs.size(), 3u);
  for (size_t i = 0; i < syncs.size(); i++) {
    const TraceSpan& s = syncs[i];
    EXPECT_EQ(s.name, "cudaStreamSynchronize");
    EXPECT_EQ(threads[s.tid].rfind("CUDA/NCCL calls: ", 0), 0u) << threads[s.tid];
    EXPECT_NE(s.begin["args"]["stack"].get<std::string>().find("Trainer > step;synchronize"), std::string::npos)
        << s.begin;
    EXPECT_EQ(s.begin["args"]["result"], 0);
    EXPECT_GE(s.dur, 0);
    EXPECT_GE(s.ts, steps[i].first) << s.begin;
    EXPECT_LE(s.ts + s.dur, steps[i].second) << s.begin;
  }

  // The same frames as spans of the main thread's stacks, named as the
  // flame graphs name them, under <module>.
  bool step_on_stack = false;
  for (const TraceSpan& s : TraceSpans(doc, "cpu")) step_on_stack |= s.name == "Trainer > step";
  EXPECT_TRUE(step_on_stack);

  // What went in and what did not, in summary.json and in the trace.
  const json summary = json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  const json& tl = summary["timeline"];
  EXPECT_EQ(tl["file"], "timeline.json.gz");
  EXPECT_EQ(tl["kept"]["gpu"], 9);
  // Six launches, three copies and the memory calls, each once, every
  // memory call with its eBPF event.
  EXPECT_EQ(tl["kept"]["api"], 9 + memory_calls.size());
  EXPECT_EQ(tl["memory_calls_joined"], memory_calls.size());
  EXPECT_EQ(tl["api_calls_dropped_in_process"], 0);
  EXPECT_EQ(tl["flows"], 9);
  EXPECT_EQ(tl["gpu_records_without_launch"], 0);
  EXPECT_EQ(tl["gpu_records_without_clock"], 0);
  for (const char* key : {"dropped_over_max_events", "dropped_over_max_bytes"})
    for (const auto& [type, n] : tl[key].items()) EXPECT_EQ(n, 0) << key << " " << type;
  EXPECT_GE(doc["metadata"]["gpu_clock"][0]["snapshots"], 1);
}

// A timeline costs the workload no stack per launch: launch stacks are
// sampled as without one, and every launch and copy call still comes as an
// exact span with its arrow (the library's callbacks, no trap). With a
// burst of one stack a thread (a tiny GPUFLAME_LAUNCH_STACKS_PER_S), one of
// the nine calls carries a stack; --timeline-every-launch-stack takes all
// nine, whatever the environment says.
TEST(TimelineTest, LaunchStacksAreSampledYetEveryCallHasItsSpanAndArrow) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const std::string out = TempDir("timeline_sampled");
  for (const bool every : {false, true}) {
    const std::string dir = out + (every ? "/every" : "/sampled");
    RunResult r = Sh(SimEnv() + " GPUFLAME_LAUNCH_STACKS_PER_S=0.001 " + GPUFLAME_BIN + " record -q " +
                     (every ? "--timeline-every-launch-stack" : "--timeline") + " -o " + dir + " -- " +
                     PyenvPython("3.12") + " " + Workload("timeline.py"));
    ASSERT_EQ(r.status, 0) << r.output;
    auto text = exporters::Gunzip(ReadFile(dir + "/timeline.json.gz"));
    ASSERT_TRUE(text.ok()) << text.status();
    const json doc = json::parse(*text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded());
    CheckTraceSchema(doc);
    std::set<std::string> arrows;
    int calls = 0, with_stack = 0;
    for (const json& c : Select(doc, "X", "cuda")) {
      if (!c.contains("bind_id")) continue;  // the synchronise calls
      calls++;
      arrows.insert(c["bind_id"]);
      const std::string stack = c["args"]["stack"];
      if (stack.rfind("[not sampled", 0) != 0) {
        with_stack++;
        EXPECT_NE(stack.find("<module>;"), std::string::npos) << stack;
      }
    }
    EXPECT_EQ(calls, 9) << every;
    EXPECT_EQ(with_stack, every ? 9 : 1) << every;
    for (const TraceSpan& g : TraceSpans(doc, "gpu"))
      EXPECT_TRUE(arrows.contains(g.begin.value("bind_id", ""))) << g.begin;
    EXPECT_EQ(doc["metadata"]["gpu_records_without_launch"], 0);
  }
}

TEST(TimelineTest, OffByDefaultAndItsLimitsAreCounted) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const std::string out = TempDir("timeline_limits");
  RunResult plain = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q -o " + out + "/plain -- " + PyenvPython("3.12") +
                       " " + Workload("timeline.py"));
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_FALSE(std::filesystem::exists(out + "/plain/timeline.json.gz"));
  EXPECT_EQ(json::parse(ReadFile(out + "/plain/summary.json"))["timeline"], nullptr);
  // Ten events at most: the rest are counted, said on the terminal and in the trace.
  RunResult small = Sh(SimEnv() + " " + GPUFLAME_BIN + " record --timeline-max-events 10 -o " + out + "/small -- " +
                       PyenvPython("3.12") + " " + Workload("timeline.py"));
  ASSERT_EQ(small.status, 0) << small.output;
  EXPECT_NE(small.output.find("the timeline left out"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("timeline.json.gz"), std::string::npos) << small.output;
  const json summary = json::parse(ReadFile(out + "/small/summary.json"));
  uint64_t kept = 0, dropped = 0;
  for (const auto& [type, n] : summary["timeline"]["kept"].items()) kept += n.get<uint64_t>();
  for (const auto& [type, n] : summary["timeline"]["dropped_over_max_events"].items()) dropped += n.get<uint64_t>();
  EXPECT_EQ(kept, 10u);
  EXPECT_GT(dropped, 0u);
  auto text = exporters::Gunzip(ReadFile(out + "/small/timeline.json.gz"));
  ASSERT_TRUE(text.ok());
  const json doc = json::parse(*text);
  CheckTraceSchema(doc);
  EXPECT_EQ(doc["metadata"]["limits"]["max_events"], 10);
}

}  // namespace
}  // namespace gpuflame::e2e

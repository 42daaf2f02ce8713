// The timeline's model-loading I/O spans end to end (bpf/io_calls.bpf.h):
// the real binary with real eBPF records a real Python process
// (tests/workloads/io_loading.py) that opens, reads, preads and maps a
// weights file of known size on a thread of its own, while a process it
// does not follow reads the same file. The spans must hold the exact bytes
// and path, on the loading thread's I/O track, inside the time the workload
// says it took; the bystander must have none; the small read is counted,
// not drawn. Without the timeline (or with --no-timeline-io) the two syscall
// programs are not even loaded.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
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

constexpr int64_t kSize = (3 << 20) + 12345;  // 3.0 MiB and some: no read of a power of two by chance

std::string WriteWeights(const std::string& dir) {
  const std::string path = dir + "/model-00001.safetensors";
  std::ofstream f(path, std::ios::binary);
  std::string block(1 << 16, 'w');
  for (int64_t left = kSize; left > 0; left -= static_cast<int64_t>(block.size()))
    f.write(block.data(), std::min<int64_t>(left, static_cast<int64_t>(block.size())));
  return path;
}

// "io_loading pid=P tid=T begin=B end=E" from the workload's output.
struct Loaded {
  uint64_t pid = 0, tid = 0, begin = 0, end = 0;
};
Loaded ParseLoaded(const std::string& output) {
  Loaded l;
  const size_t at = output.find("io_loading pid=");
  if (at == std::string::npos) return l;
  unsigned long long p = 0, t = 0, b = 0, e = 0;
  if (std::sscanf(output.c_str() + at, "io_loading pid=%llu tid=%llu begin=%llu end=%llu", &p, &t, &b, &e) == 4)
    l = {p, t, b, e};
  return l;
}

json Summary(const std::string& dir) { return json::parse(ReadFile(dir + "/summary.json"), nullptr, false); }

bool ProgramLoaded(const json& summary, const std::string& name) {
  return summary["self_cost"]["programs"].contains(name);
}

TEST(IoTimelineTest, OpenReadPreadAndMmapOfAWeightsFileAreExactSpansOnTheLoadingThread) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string out = TempDir("io_timeline");
  const std::string weights = WriteWeights(out);
  const std::string python = PyenvPython("3.12");
  // The bystander starts first and outlives the recording; its pid is said.
  RunResult r =
      Sh(python + " " + Workload("io_bystander.py") + " " + weights + " 20 & B=$!; echo bystander=$B; " + GPUFLAME_BIN +
         " record -q --timeline -o " + out + "/rec -- " + python + " " + Workload("io_loading.py") + " " + weights +
         " " + std::to_string(kSize) + "; s=$?; kill $B; exit $s");
  ASSERT_EQ(r.status, 0) << r.output;
  const Loaded loaded = ParseLoaded(r.output);
  ASSERT_NE(loaded.pid, 0u) << r.output;
  const size_t b = r.output.find("bystander=");
  ASSERT_NE(b, std::string::npos) << r.output;
  const uint64_t bystander = std::stoull(r.output.substr(b + 10));

  auto text = exporters::Gunzip(ReadFile(out + "/rec/timeline.json.gz"));
  ASSERT_TRUE(text.ok()) << text.status();
  const json doc = json::parse(*text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  CheckTraceSchema(doc);
  std::map<std::pair<uint64_t, uint64_t>, std::string> threads;  // (pid, tid) -> name
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  const uint64_t zero = doc["metadata"]["ts_zero_ns"];
  const std::string file = std::filesystem::path(weights).filename();

  const TraceSpan *open = nullptr, *read = nullptr, *pread = nullptr, *map = nullptr;
  std::vector<TraceSpan> io = TraceSpans(doc, "io");
  for (const TraceSpan& s : io) {
    EXPECT_NE(s.pid, bystander) << "a process gpuflame does not follow: " << s.begin;
    if (s.pid != loaded.pid) continue;
    const json& a = s.begin["args"];
    if (s.name == "openat " + weights) open = &s;
    if (s.name == "read 3.0 MiB" && a["bytes"] == kSize) read = &s;
    if (s.name.rfind("pread64 ", 0) == 0) {
      EXPECT_NE(a["bytes"], 100) << "under --timeline-io-min-bytes: counted, not drawn";
      if (a["bytes"] == 100000) pread = &s;
    }
    if (s.name == "mmap 3.0 MiB " + file) map = &s;
  }
  ASSERT_NE(open, nullptr) << io.size() << " I/O spans";
  ASSERT_NE(read, nullptr);
  ASSERT_NE(pread, nullptr);
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(open->begin["args"]["path"], weights);
  EXPECT_GE(open->begin["args"]["result"].get<int64_t>(), 0) << "a descriptor";
  EXPECT_EQ(read->begin["args"]["result"], kSize);
  EXPECT_EQ(read->begin["args"]["fd"], open->begin["args"]["result"]);
  EXPECT_EQ(pread->begin["args"]["offset"], 4096);
  EXPECT_EQ(pread->begin["args"]["fd"], open->begin["args"]["result"]);
  EXPECT_EQ(map->begin["args"]["bytes"], kSize);
  EXPECT_EQ(map->begin["args"]["file"], file);
  EXPECT_EQ(map->begin["args"]["offset"], 0);
  // In order, on the loading thread's own I/O track, inside the time the
  // workload measured around them (ts: microseconds from ts_zero_ns, to the
  // nanosecond).
  const TraceSpan* in_order[] = {open, read, pread, map};
  double last_end = 0;
  for (const TraceSpan* s : in_order) {
    EXPECT_EQ(threads[std::pair(s->pid, s->tid)], "I/O: gf-loader") << s->begin;
    EXPECT_EQ(s->tid, open->tid);
    const double begin_ns = static_cast<double>(zero) + s->ts * 1000, end_ns = begin_ns + s->dur * 1000;
    EXPECT_GE(begin_ns, static_cast<double>(loaded.begin) - 1) << s->begin;
    EXPECT_LE(end_ns, static_cast<double>(loaded.end) + 1) << s->begin;
    EXPECT_GE(s->ts, last_end) << s->begin;
    last_end = s->ts + s->dur;
  }
  for (const auto& [key, name] : threads) EXPECT_NE(key.first, bystander) << name;

  // What the filters held back, counted where the user looks; the programs ran.
  const json summary = Summary(out + "/rec");
  ASSERT_FALSE(summary.is_discarded());
  const json& counts = summary["timeline"]["io"];
  EXPECT_EQ(counts["attached"], true);
  EXPECT_GE(counts["small_reads_not_sent"].get<uint64_t>(), 1u) << counts;
  EXPECT_EQ(counts["over_per_process_cap"], 0);
  EXPECT_GE(counts["sent"].get<uint64_t>(), 4u);
  EXPECT_EQ(doc["metadata"]["io"], counts);
  EXPECT_GE(summary["timeline"]["kept"]["io"].get<uint64_t>(), 4u);
  EXPECT_GT(summary["self_cost"]["programs"]["io_exit"]["hits"].get<uint64_t>(), 0u);
  EXPECT_GT(summary["self_cost"]["programs"]["io_enter"]["hits"].get<uint64_t>(), 0u);
}

TEST(IoTimelineTest, WithoutTheTimelineOrWithNoTimelineIoItsProgramsAreNotLoaded) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string out = TempDir("io_timeline_off");
  const std::string weights = WriteWeights(out);
  const std::string cmd =
      " -- " + PyenvPython("3.12") + " " + Workload("io_loading.py") + " " + weights + " " + std::to_string(kSize);
  RunResult plain = Sh(std::string(GPUFLAME_BIN) + " record -q -o " + out + "/plain" + cmd);
  ASSERT_EQ(plain.status, 0) << plain.output;
  const json s1 = Summary(out + "/plain");
  ASSERT_FALSE(s1.is_discarded());
  EXPECT_FALSE(ProgramLoaded(s1, "io_enter"));
  EXPECT_FALSE(ProgramLoaded(s1, "io_exit"));
  EXPECT_TRUE(ProgramLoaded(s1, "watch_mmap")) << "the object's other programs are listed";
  EXPECT_EQ(s1["bpf"]["io_spans"], 0);

  RunResult no_io = Sh(std::string(GPUFLAME_BIN) + " record -q --timeline --no-timeline-io -o " + out + "/no_io" + cmd);
  ASSERT_EQ(no_io.status, 0) << no_io.output;
  const json s2 = Summary(out + "/no_io");
  EXPECT_FALSE(ProgramLoaded(s2, "io_enter"));
  EXPECT_FALSE(ProgramLoaded(s2, "io_exit"));
  EXPECT_EQ(s2["timeline"]["io"]["attached"], false);
  auto text = exporters::Gunzip(ReadFile(out + "/no_io/timeline.json.gz"));
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(TraceSpans(json::parse(*text), "io").empty());
}

}  // namespace
}  // namespace gpuflame::e2e

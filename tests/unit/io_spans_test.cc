// The timeline's model-loading I/O (bpf/io_calls.bpf.h): the GF_EV_IO
// decoder (profiler/pipeline/io_record.h), its placement on the timeline and
// its spans in the Chrome trace (exporters/trace), names and args exact.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/trace/chrome_trace.h"
#include "profiler/pipeline/io_record.h"
#include "profiler/timeline/timeline.h"
#include "tests/support/trace_schema.h"

namespace gpuflame::profiler {
namespace {

using nlohmann::json;

gf_event IoHeader(uint16_t call, uint64_t start, uint64_t end) {
  gf_event ev{};
  ev.kind = GF_EV_IO;
  ev.domain = GF_DOMAIN_IO;
  ev.api = call;
  ev.pid = 10;
  ev.tid = 11;
  ev.arg2 = start;
  ev.ts_ns = end;
  return ev;
}

std::vector<uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

TEST(IoRecordTest, DecodesEveryField) {
  gf_event ev = IoHeader(GF_IO_PREAD64, 100, 250);
  ev.addr = 7;
  ev.size = 4 << 20;
  ev.arg0 = 4 << 20;
  ev.arg1 = uint64_t{5} << 32;  // an offset past 4 GiB
  const std::vector<uint8_t> body = Bytes(std::string_view("\0", 1));
  auto r = DecodeIo(ev, body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pid, 10u);
  EXPECT_EQ(r->tid, 11u);
  EXPECT_EQ(r->start_ns, 100u);
  EXPECT_EQ(r->end_ns, 250u);
  EXPECT_EQ(r->call, GF_IO_PREAD64);
  EXPECT_EQ(r->fd, 7u);
  EXPECT_EQ(r->bytes, 4 << 20);
  EXPECT_EQ(r->result, 4 << 20);
  EXPECT_EQ(r->arg, uint64_t{5} << 32);
  EXPECT_EQ(r->name, "");
  EXPECT_FALSE(r->truncated);

  ev = IoHeader(GF_IO_OPENAT, 1, 2);
  ev.arg0 = static_cast<uint64_t>(int64_t{-2});  // ENOENT
  ev.flags = GF_EVF_IO_NAME_TRUNCATED;
  const std::vector<uint8_t> path = Bytes(std::string_view("/m/w.bin\0", 9));  // the name points into it
  r = DecodeIo(ev, path);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "/m/w.bin");
  EXPECT_EQ(r->result, -2);
  EXPECT_TRUE(r->truncated);
}

TEST(IoRecordTest, RejectsWhatNoProbeSends) {
  const std::vector<uint8_t> ok = Bytes(std::string_view("x\0", 2));
  EXPECT_TRUE(DecodeIo(IoHeader(GF_IO_READ, 1, 2), ok));
  EXPECT_FALSE(DecodeIo(IoHeader(0, 1, 2), ok)) << "no such call";
  EXPECT_FALSE(DecodeIo(IoHeader(GF_IO_IOCTL + 1, 1, 2), ok)) << "no such call";
  EXPECT_FALSE(DecodeIo(IoHeader(GF_IO_READ, 3, 2), ok)) << "an end before its start";
  EXPECT_FALSE(DecodeIo(IoHeader(GF_IO_READ, 1, 2), {})) << "no name, not even its NUL";
  EXPECT_FALSE(DecodeIo(IoHeader(GF_IO_READ, 1, 2), Bytes("abc"))) << "no NUL";
  std::vector<uint8_t> long_name(GF_IO_NAME_MAX + 1, 'a');
  long_name.back() = 0;
  EXPECT_FALSE(DecodeIo(IoHeader(GF_IO_READ, 1, 2), long_name)) << "over the probe's bound";
  gf_event wrong = IoHeader(GF_IO_READ, 1, 2);
  wrong.kind = GF_EV_CUDA_SYNC;
  EXPECT_FALSE(DecodeIo(wrong, ok));
  // Bytes past the NUL (the probe never sends them) are not the name.
  const std::vector<uint8_t> tail = Bytes(std::string_view("a\0bc", 4));
  auto r = DecodeIo(IoHeader(GF_IO_OPENAT, 1, 2), tail);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "a");
}

TEST(IoSpansTest, EachCallIsASpanOnItsThreadsIoTrackNamedAndArgued) {
  StackTable stacks;
  FrameTable frames;
  timeline::TimelineOptions o;
  timeline::Timeline tl(stacks, frames, o);
  const uint64_t T = 1'000'000'000;
  constexpr pid_t kPid = 300;
  const std::string path = "/models/llama/model-00001-of-00002.safetensors";
  tl.OnIo(kPid, kPid, T, T + 5'000, GF_IO_OPENAT, static_cast<uint64_t>(-100), 0, 3, 0x80000, path, false);
  tl.OnIo(kPid, kPid, T + 6'000, T + 10'000, GF_IO_READ, 3, 4 << 20, 4 << 20, 0, "", false);
  tl.OnIo(kPid, kPid + 1, T + 7'000, T + 9'000, GF_IO_PREAD64, 3, 1536, 1536, uint64_t{6} << 30, "", false);
  tl.OnIo(kPid, kPid, T + 11'000, T + 12'000, GF_IO_MMAP, 3, 4 << 20, 0x7f0000000000, 0, "model.safetensors", false);
  tl.OnIo(kPid, kPid, T + 13'000, T + 13'500, GF_IO_IOCTL, 9, 0, 0, 0xc0104e2a, "nvidiactl", false);
  tl.OnIo(kPid, kPid, T + 14'000, T + 15'000, GF_IO_OPENAT, static_cast<uint64_t>(-100), 0, -2, 0,
          std::string(GF_IO_NAME_MAX - 1, 'p'), true);
  tl.Finish(T + 20'000);
  EXPECT_EQ(tl.stats().kept[static_cast<size_t>(timeline::EventType::kIo)], 6u);

  exporters::ChromeTraceStats stats;
  const json doc = json::parse(exporters::ChromeTraceJson(tl, {}, &stats));
  CheckTraceSchema(doc);
  std::map<uint64_t, std::string> thread_names;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
  std::vector<TraceSpan> io = TraceSpans(doc, "io");
  ASSERT_EQ(io.size(), 6u);

  EXPECT_EQ(io[0].name, "openat " + path);
  EXPECT_EQ(io[0].ts, 0.0);
  EXPECT_EQ(io[0].dur, 5.0);
  EXPECT_EQ(io[0].pid, static_cast<uint64_t>(kPid));
  EXPECT_NE(io[0].tid, static_cast<uint64_t>(kPid)) << "a track beside the thread's sampled stacks";
  EXPECT_EQ(thread_names[io[0].tid], "I/O: thread 300");
  EXPECT_EQ(io[0].begin["args"]["path"], path);
  EXPECT_EQ(io[0].begin["args"]["result"], 3);
  EXPECT_EQ(io[0].begin["args"]["dirfd"], -100);
  EXPECT_EQ(io[0].begin["args"]["flags"], "0x80000");

  EXPECT_EQ(io[1].name, "read 4.0 MiB");
  EXPECT_EQ(io[1].tid, io[0].tid) << "one track per thread";
  EXPECT_EQ(io[1].begin["args"]["bytes"], 4 << 20);
  EXPECT_EQ(io[1].begin["args"]["fd"], 3);
  EXPECT_EQ(io[1].dur, 4.0);

  EXPECT_EQ(io[2].name, "pread64 1.5 KiB");
  EXPECT_NE(io[2].tid, io[0].tid) << "another thread, another track";
  EXPECT_EQ(thread_names[io[2].tid], "I/O: thread 301");
  EXPECT_EQ(io[2].begin["args"]["offset"], uint64_t{6} << 30);

  EXPECT_EQ(io[3].name, "mmap 4.0 MiB model.safetensors");
  EXPECT_EQ(io[3].begin["args"]["file"], "model.safetensors");
  EXPECT_EQ(io[3].begin["args"]["result"], "0x7f0000000000");

  EXPECT_EQ(io[4].name, "ioctl nvidiactl");
  EXPECT_EQ(io[4].begin["args"]["request"], "0xc0104e2a");
  EXPECT_FALSE(io[4].begin["args"].contains("bytes"));

  EXPECT_EQ(io[5].begin["args"]["result"], -2) << "a failed open keeps its errno";
  EXPECT_TRUE(io[5].begin["args"].contains("name_truncated"));
}

TEST(IoSpansTest, NamesAreInternedAndBoundedAndTheEventLimitCountsIo) {
  StackTable stacks;
  FrameTable frames;
  timeline::TimelineOptions o;
  o.max_events = 3;
  timeline::Timeline tl(stacks, frames, o);
  for (int i = 0; i < 5; i++) tl.OnIo(1, 1, 10 * i, 10 * i + 5, GF_IO_OPENAT, 0, 0, 3, 0, "/same/path", false);
  EXPECT_EQ(tl.stats().kept[static_cast<size_t>(timeline::EventType::kIo)], 3u);
  EXPECT_EQ(tl.stats().dropped[static_cast<size_t>(timeline::EventType::kIo)], 2u) << "counted, never silent";
  ASSERT_NE(tl.IoName(0), nullptr);
  EXPECT_EQ(*tl.IoName(0), "/same/path");
  EXPECT_EQ(tl.IoName(1), nullptr) << "one path, one name";
  EXPECT_EQ(timeline::EventCountsJson(tl.stats().dropped).find("\"io\": 2") != std::string::npos, true);
}

}  // namespace
}  // namespace gpuflame::profiler
